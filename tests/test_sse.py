"""The SSE relay of a turn: what a reader receives, and how often it is written to."""

from __future__ import annotations

import json
import threading
import time

from hypothesis import given, settings
from hypothesis import strategies as st

from api.agent.turn_journal import Turn
from api.rules import render_patches
from api.services.live_render import LiveRender
from api.services.render import render_markdown
from api.web import sse


class _Handler:
    """A request handler whose stream is recorded write by write."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []

    def send_response(self, *_args) -> None:
        pass

    def send_header(self, *_args) -> None:
        pass

    def end_headers(self) -> None:
        pass

    @property
    def wfile(self):
        return self

    def write(self, data: bytes) -> int:
        self.writes.append(data)
        return len(data)

    def events(self) -> list[tuple[str, dict]]:
        out = []
        for block in b"".join(self.writes).decode().split("\n\n"):
            fields = dict(line.split(": ", 1) for line in block.split("\n") if ": " in line)
            if "event" in fields:
                out.append((fields["event"], json.loads(fields["data"])))
        return out


def _relay(pieces: list[str], gap_s: float, tick_s: float = sse.STREAM_TICK_S) -> _Handler:
    """``pieces`` streamed as tokens ``gap_s`` apart through the live render and the journal, relayed."""
    turn = Turn("stream", "session")
    live = LiveRender(turn.append, interval=0.02)
    handler = _Handler()
    reader = threading.Thread(target=sse.serve_turn_events, args=(handler, turn, None, 5.0, tick_s))
    reader.start()
    for piece in pieces:
        live("token", {"text": piece})
        if gap_s:
            time.sleep(gap_s)
    live.close()
    turn.append("done", {"session": None})
    turn.finish()
    reader.join(30)
    assert not reader.is_alive()
    return handler


def _shown(events: list[tuple[str, dict]]) -> str:
    state = render_patches.SegmentState()
    for name, data in events:
        if name == "render":
            render_patches.apply(state, data)
    return "".join(state.blocks)


def test_tokens_arriving_within_a_tick_reach_the_reader_in_one_write():
    pieces = [f"word{i} " for i in range(60)]
    handler = _relay(pieces, gap_s=0.005)
    # 60 tokens over ~0.3 s: a write per tick (0.05 s), not one per token.
    assert len(handler.writes) <= 15
    events = handler.events()
    assert "".join(d["text"] for n, d in events if n == "token") == "".join(pieces)
    assert [n for n, _ in events][-1] == "done"


_LINES = st.lists(
    st.sampled_from(
        [
            "",
            "plain words here",
            "- item with **bold**",
            "1. numbered",
            "> quoted",
            "```python",
            "```",
            "| a | b |",
            "|---|---|",
            "# Heading",
            "a `code` b _em_ c",
            "see [link](https://example.com)",
        ]
    ),
    min_size=1,
    max_size=20,
)


@settings(max_examples=40, deadline=None)
@given(_LINES, st.lists(st.integers(0, 300), max_size=25))
def test_a_reader_of_an_answer_split_into_any_chunks_ends_showing_the_saved_rendering(lines, cuts):
    text = "\n".join(lines)
    if not text.strip():
        return
    bounds = sorted({c for c in cuts if 0 < c < len(text)} | {0, len(text)})
    pieces = [text[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]
    events = _relay(pieces, gap_s=0.0, tick_s=0.001).events()
    assert "".join(d["text"] for n, d in events if n == "token") == text
    assert _shown(events) == render_markdown(text)

"""The turn journal: sequence numbers, resume, and a bounded amount kept of a long answer's renders."""

from __future__ import annotations

import tracemalloc

import pytest

from api.agent import turn_journal
from api.agent.turn_journal import COMPACT_MIN_CHARS, Turn
from api.rules import render_patches
from api.services.live_render import LiveRender
from api.services.render import plain_text_html, render_markdown


def _long_answer(paragraphs: int = 500) -> str:
    return "\n\n".join(
        f"Paragraph {i}: " + "some words of the answer " * 12 for i in range(paragraphs)
    ).rstrip()


MARKDOWN_SIZED = _long_answer(500)  # about 160 KB: rendered as Markdown
PLAIN_SIZED = _long_answer(1000)  # about 320 KB: past MARKDOWN_MAX_CHARS, shown as plain text


def _streamed(text: str, step: int = 400, tool: bool = False) -> Turn:
    """A turn whose journal received ``text`` as tokens through a LiveRender rendering after each one
    (with ``tool``, a tool call between its two halves)."""
    turn = Turn("s1", "sid")
    ticks = iter(range(0, 10**12, 1000))
    live = LiveRender(turn.append, interval=0.0, clock=lambda: next(ticks))
    for start in range(0, len(text), step):
        live("token", {"text": text[start : start + step]})
        if tool and start == step * 100:
            live("tool", {"id": "c1", "name": "todo", "args": {}})
            live("tool_complete", {"id": "c1", "name": "todo", "result": "ok"})
    live.close()
    turn.append("done", {"session": None})
    turn.finish()
    return turn


def _page_after(events) -> dict[int, str]:
    """What a page that applied ``events`` shows of each segment."""
    states: dict[int, render_patches.SegmentState] = {}
    for _seq, name, data in events:
        if name == "render":
            render_patches.apply(states.setdefault(data["segment"], render_patches.SegmentState()), data)
    return {
        segment: plain_text_html("".join(s.plain)) if s.plain is not None else "".join(s.blocks)
        for segment, s in states.items()
    }


@pytest.mark.parametrize("text", [MARKDOWN_SIZED, PLAIN_SIZED], ids=["markdown", "plain"])
def test_a_long_answer_keeps_a_bounded_journal_of_renders(text):
    """Every render event used to carry the whole answer so far, and the journal kept all of them
    (hundreds of copies: 123 MB for a 600 KB answer)."""
    turn = _streamed(text)
    assert _page_after(turn.events) == {0: render_markdown(text)}
    kept = sum(render_patches.size(data) for _, name, data in turn.events if name == "render")
    assert kept < 2 * len(render_markdown(text)) + 2 * COMPACT_MIN_CHARS


@pytest.mark.parametrize("text", [MARKDOWN_SIZED, PLAIN_SIZED], ids=["markdown", "plain"])
def test_a_reader_resuming_after_any_event_ends_with_the_page_of_a_reader_from_the_start(text):
    turn = _streamed(text, tool=True)
    full = _page_after(turn.events_after(0, 0)[0])
    cut = 400 * 101
    assert full == {0: render_markdown(text[:cut]), 1: render_markdown(text[cut:])}
    seqs = [seq for seq, _, _ in turn.events]
    for after in {0, 1, *seqs[:: max(1, len(seqs) // 200)], *seqs[-5:]}:
        seen, finished = turn.events_after(after, 0)
        assert finished and all(seq > after for seq, _, _ in seen)
        # What it saw before `after` (from the live journal at that time) is a prefix it already applied:
        # replaying every event up to `after`, then the resumed ones, shows the same page.
        before = [e for e in turn.events if e[0] <= after]
        assert _page_after(before + seen) == full, after


@pytest.mark.parametrize("text", [MARKDOWN_SIZED, PLAIN_SIZED], ids=["markdown", "plain"])
def test_a_reader_that_read_patches_before_they_were_folded_resumes_to_the_same_page(text):
    turn = Turn("s2", "sid")
    ticks = iter(range(0, 10**12, 1000))
    live = LiveRender(turn.append, interval=0.0, clock=lambda: next(ticks))
    seen: list = []
    last = 0
    for start in range(0, len(text), 400):
        live("token", {"text": text[start : start + 400]})
        if start % 4000 == 0:  # a live reader polls now and then, before later patches fold what it read
            fresh, _ = turn.events_after(last, 0)
            seen += fresh
            last = seen[-1][0] if seen else 0
    live.close()
    turn.finish()
    seen += turn.events_after(last, 0)[0]
    assert _page_after(seen) == {0: render_markdown(text)}
    assert "".join(d["text"] for _, n, d in seen if n == "token") == text


def test_tokens_are_kept_compactly_and_read_back_as_the_events_they_were():
    """Each word-sized token was a tuple and a dict in the journal (~300 bytes: 32 MB for a 600 KB answer)."""
    words = [f"w{i} " for i in range(100_000)]
    tracemalloc.start()
    try:
        turn = Turn("s3", "sid")
        before = tracemalloc.get_traced_memory()[0]
        for i, word in enumerate(words):
            turn.append("token", {"text": word})
            if i % 1000 == 999:
                turn.append("status", {"message": f"step {i}"})
        turn.finish()
        kept = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert kept < 4_000_000  # the text (~690 KB) plus a few bytes a token
    events = turn.events
    tokens = [(seq, d["text"]) for seq, name, d in events if name == "token"]
    assert [text for _, text in tokens] == words
    assert [seq for seq, _, _ in events] == list(range(1, len(events) + 1))
    assert turn.events_after(500, 0)[0][0] == (501, "token", {"text": "w500 "})
    assert turn.events_after(1000, 0)[0][:2] == [
        (1001, "status", {"message": "step 999"}),
        (1002, "token", {"text": "w1000 "}),
    ]


def test_a_reader_polling_at_any_moment_receives_every_token_once_in_order():
    text = _long_answer(300)
    words = text.split(" ")
    turn = Turn("s4", "sid")
    received: list[str] = []
    seen = 0
    for i, word in enumerate(words):
        turn.append("token", {"text": word + (" " if i < len(words) - 1 else "")})
        if i % 7 == 0 or i % 11 == 0:
            events, _ = turn.events_after(seen, 0)
            received += [d["text"] for _, n, d in events if n == "token"]
            seen = events[-1][0] if events else seen
    turn.finish()
    received += [d["text"] for _, n, d in turn.events_after(seen, 0)[0] if n == "token"]
    assert "".join(received) == text


def test_the_finished_journals_kept_are_the_newest_few_and_none_keeps_its_runner():
    """A server that finished turns faster than they aged out (ten minutes) kept every one of them, each with
    its runner, whose request holds the session's whole model context; 1,000 quick turns grew its memory by
    22–40 MB. At most ``FINISHED_KEPT`` finished journals stay, the newest, and a finished one holds no runner."""
    live_turns = turn_journal.LiveTurns()
    turns = [Turn(f"memory-{i}", f"memory-session-{i % 5}") for i in range(turn_journal.FINISHED_KEPT + 20)]
    for turn in turns:
        live_turns.start(turn)
        turn.runner = object()  # type: ignore[assignment]
        live_turns.end(turn)
        turn.finish()
        assert turn.runner is None
    live = Turn("memory-live", "memory-session-live")
    live_turns.start(live)  # the bound is kept as each turn starts
    kept = [t for t in turns if live_turns.get_turn(t.stream_id) is t]
    assert kept == turns[-turn_journal.FINISHED_KEPT :]
    assert live_turns.get_turn("memory-live") is live and live_turns.live_turn_for(live.session_id) is live
    assert live_turns.latest_for("memory-session-2") is turns[-2]  # its session's newest, still readable

"""LiveRender: throttled renders of the streaming answer, one segment per stretch of text between tools."""

from __future__ import annotations

import threading
import time
from html.parser import HTMLParser

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from api.rules import render_patches
from api.services.live_render import LiveRender
from api.services.partial_render import render_unfinished
from api.services.render import MARKDOWN_MAX_CHARS, plain_text_html, render_markdown


class Sink:
    def __init__(self):
        self.events: list[tuple[str, dict]] = []
        self.lock = threading.Lock()

    def __call__(self, name: str, data: dict) -> None:
        with self.lock:
            self.events.append((name, data))

    def renders(self) -> list[dict]:
        with self.lock:
            return [data for name, data in self.events if name == "render"]

    def shown(self, upto: int | None = None) -> dict[int, str]:
        """Each segment's HTML as a page that applied the first ``upto`` render patches shows it."""
        states: dict[int, render_patches.SegmentState] = {}
        for patch in self.renders()[:upto]:
            render_patches.apply(states.setdefault(patch["segment"], render_patches.SegmentState()), patch)
        return {segment: html_of(state) for segment, state in states.items()}


def html_of(state: render_patches.SegmentState) -> str:
    if state.plain is not None:
        return plain_text_html("".join(state.plain))
    return "".join(state.blocks)


def stream(text: str, cuts: list[int]) -> Sink:
    """``text`` through a LiveRender that renders after every token, cut at ``cuts``."""
    sink = Sink()
    ticks = iter(range(0, 10**12, 1000))  # each token comes long after the previous render
    live = LiveRender(sink, interval=0.0, clock=lambda: next(ticks))
    last = 0
    for cut in sorted({c for c in cuts if 0 < c < len(text)} | {len(text)}):
        live("token", {"text": text[last:cut]})
        last = cut
    live.close()
    return sink


class _TextOutsideCode(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.depth = 0
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.depth += tag in ("code", "pre")

    def handle_endtag(self, tag):
        self.depth -= tag in ("code", "pre")

    def handle_data(self, data):
        if not self.depth:
            self.text.append(data)


def text_outside_code(html: str) -> str:
    parser = _TextOutsideCode()
    parser.feed(html)
    parser.close()
    return "".join(parser.text)


def test_the_first_token_renders_at_once_and_later_ones_wait_for_the_interval():
    sink = Sink()
    live = LiveRender(sink, interval=60.0)
    live("token", {"text": "**bold"})
    live("token", {"text": "** text"})
    assert [name for name, _ in sink.events] == ["token", "render", "token"]
    assert sink.shown(1) == {0: "<p><strong>bold</strong></p>\n"}
    live.close()
    assert sink.renders()[-1] == {
        "segment": 0,
        "keep": 0,
        "blocks": ["<p><strong>bold</strong> text</p>\n"],
        "chars": 13,
    }


def test_a_burst_of_tokens_is_rendered_once_after_the_interval():
    sink = Sink()
    live = LiveRender(sink, interval=0.05)
    live("token", {"text": "a"})
    for _ in range(50):
        live("token", {"text": " b"})
    assert len(sink.renders()) == 1
    deadline = time.monotonic() + 10
    while len(sink.renders()) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    renders = sink.renders()
    assert len(renders) == 2 and renders[-1]["chars"] == 101
    live.close()
    assert len(sink.renders()) == 2  # nothing new to render


def test_a_tool_call_starts_a_new_segment_and_renders_the_text_before_it():
    sink = Sink()
    live = LiveRender(sink, interval=60.0)
    live("token", {"text": "Let me"})
    live("token", {"text": " check."})
    live("tool", {"id": "c1", "name": "todo", "args": {}})
    live("token", {"text": "Done."})
    live.close()
    segments = [(r["segment"], r["blocks"]) for r in sink.renders()]
    assert segments == [
        (0, ["<p>Let me</p>\n"]),
        (0, ["<p>Let me check.</p>\n"]),
        (1, ["<p>Done.</p>\n"]),
    ]
    assert [name for name, _ in sink.events].count("tool") == 1


def test_after_close_tokens_pass_through_without_renders():
    sink = Sink()
    live = LiveRender(sink, interval=0.0)
    live.close()
    live("token", {"text": "late"})
    assert sink.events == [("token", {"text": "late"})]


def test_an_open_code_fence_is_plain_until_it_closes():
    sink = Sink()
    live = LiveRender(sink, interval=0.0)
    live("token", {"text": "```python\nx = 1\n"})
    live("token", {"text": "```\n"})
    live.close()
    assert len(sink.renders()) == 2
    first, second = sink.shown(1)[0], sink.shown()[0]
    assert "<span" not in first and "x = 1" in first
    assert '<span class="n">x</span>' in second


def test_a_costly_render_stretches_the_interval():
    sink = Sink()
    live = LiveRender(sink, interval=0.0)
    big = "".join(f"- item **{i}** with `code` and [a link](https://example.com/{i})\n" for i in range(3000))
    started = time.perf_counter()
    live("token", {"text": big})  # renders at once (the interval is zero) but takes a while
    cost = time.perf_counter() - started
    live("token", {"text": "more"})  # within five times that cost: waits for the timer
    assert len(sink.renders()) == 1, cost
    live.close()
    assert len(sink.renders()) == 2


def test_a_long_answer_is_sent_as_the_blocks_that_changed_not_the_whole_text_each_time():
    """A 600 KB answer used to send its whole HTML so far in every render event (123 MB kept per turn)."""
    paragraphs = [f"Paragraph {i} with **bold** and `code`, long enough to matter. " * 3 for i in range(300)]
    text = "\n\n".join(paragraphs)
    sink = stream(text, list(range(0, len(text), 200)))
    final = render_markdown(text)
    assert len(sink.renders()) > 250
    assert sink.shown() == {0: final}
    carried = sum(render_patches.size(patch) for patch in sink.renders())
    assert carried < 2 * len(final)


def test_a_text_too_costly_for_markdown_is_streamed_as_appended_plain_text():
    line = "plain words [not a link] here\n"
    text = line * ((MARKDOWN_MAX_CHARS + 60_000) // len(line))
    sink = stream(text, list(range(0, len(text), 20_000)))
    plain = [patch for patch in sink.renders() if "plain" in patch]
    assert plain[0]["plain_from"] == 0 and len(plain) > 2
    # The trailing line break waits for more text: the agent saves the answer without it.
    assert sum(len(patch["plain"]) for patch in plain) == len(text) - 1
    assert sink.shown() == {0: render_markdown(text.rstrip())}


def test_single_line_breaks_show_while_streaming_as_in_the_saved_message():
    haiku = "An old silent pond\nA frog jumps into the pond\nSplash! Silence again"
    sink = stream(haiku, [10, 30])
    assert sink.shown() == {0: render_markdown(haiku)}
    assert sink.shown()[0].count("<br>") == 2


def test_an_open_code_span_shows_as_code_while_its_closer_has_not_arrived():
    """The backtick of an unclosed code span showed raw, then vanished when the closer came."""
    assert render_unfinished("Run `pip inst") == "<p>Run <code>pip inst</code></p>\n"
    assert render_unfinished("Run `") == "<p>Run</p>\n"
    assert render_unfinished("some **bold wor") == "<p>some <strong>bold wor</strong></p>\n"
    assert render_unfinished("- item ``a`b`") == "<ul>\n<li>item <code>a`b</code></li>\n</ul>\n"
    assert render_unfinished("snake_case and `ok` done") == render_markdown("snake_case and `ok` done")


_WORDS = st.sampled_from(["word", "two words", "x", "snake_case", "a.b", "**bold**", "*it*", "~~gone~~"])
_SPANS = st.sampled_from(["`code`", "`a b`", "``tick ` inside``", "`x`"])
_PIECES = st.lists(st.one_of(_WORDS, _SPANS), min_size=1, max_size=12)
_BLOCKS = st.lists(
    st.tuples(st.sampled_from(["", "- ", "# ", "> ", "1. "]), _PIECES, st.sampled_from(["\n", "\n\n"])),
    min_size=1,
    max_size=5,
)


def _markdown(blocks) -> str:
    return "".join(prefix + " ".join(pieces) + end for prefix, pieces, end in blocks).rstrip("\n")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_BLOCKS, st.data())
def test_no_unfinished_prefix_shows_a_lone_backtick_and_the_final_render_is_the_saved_one(blocks, data):
    text = _markdown(blocks)
    assert "`" not in text_outside_code(render_markdown(text))
    for end in range(1, len(text) + 1):
        shown = render_unfinished(text[:end])
        assert "`" not in text_outside_code(shown), (text[:end], shown)
    cuts = data.draw(st.lists(st.integers(0, len(text)), max_size=20))
    assert stream(text, cuts).shown() == {0: render_markdown(text)}


_MARKDOWN_LINES = st.lists(
    st.sampled_from(
        [
            "Plain text line",
            "",
            "- item one",
            "  - nested item",
            "1. first",
            "2. second",
            "> quoted",
            "```python",
            "```",
            "    indented code",
            "| a | b |",
            "|---|---|",
            "# Heading",
            "Setext",
            "===",
            "$$",
            "x^2",
            "***",
            "see [ref] and [link](https://example.com)",
            "[ref]: https://example.com/ref",
            "a `code` b **bold** c",
        ]
    ),
    max_size=25,
)


@settings(max_examples=150, deadline=None)
@given(_MARKDOWN_LINES, st.lists(st.integers(0, 400), max_size=30))
def test_patches_streamed_in_any_chunks_end_as_the_saved_message_renders(lines, cuts):
    text = "\n".join(lines)
    if not text.strip():
        return
    assert stream(text, cuts).shown() == {0: render_markdown(text)}


def test_renders_that_wait_for_the_interval_share_one_thread():
    """A thread started per delayed render cost as much CPU as the render itself."""
    sink = Sink()
    already = set(threading.enumerate())  # other tests' servers and loops in this worker process
    live = LiveRender(sink, interval=0.02)
    seen: set[threading.Thread] = set()
    for i in range(40):
        live("token", {"text": f"word{i} "})
        seen.update(threading.enumerate())
        time.sleep(0.005)
    live.close()
    assert len(sink.renders()) >= 5
    assert len(seen - already) <= 1
    assert sink.shown() == {0: render_markdown("".join(f"word{i} " for i in range(40)))}

"""LiveRender: throttled renders of the streaming answer, one segment per stretch of text between tools."""

from __future__ import annotations

import threading
import time

from api.live_render import LiveRender
from api.render import render_markdown


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


def test_the_first_token_renders_at_once_and_later_ones_wait_for_the_interval():
    sink = Sink()
    live = LiveRender(sink, interval=60.0)
    live("token", {"text": "**bold"})
    live("token", {"text": "** text"})
    assert [name for name, _ in sink.events] == ["token", "render", "token"]
    assert sink.renders()[0]["html"] == render_markdown("**bold", partial=True)
    live.close()
    assert sink.renders()[-1] == {"segment": 0, "html": "<p><strong>bold</strong> text</p>\n", "chars": 13}


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
    segments = [(r["segment"], r["html"]) for r in sink.renders()]
    assert segments == [
        (0, "<p>Let me</p>\n"),
        (0, "<p>Let me check.</p>\n"),
        (1, "<p>Done.</p>\n"),
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
    first, second = sink.renders()
    assert "<span" not in first["html"] and "x = 1" in first["html"]
    assert '<span class="n">x</span>' in second["html"]


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

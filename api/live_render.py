"""The answer being streamed, rendered as it grows: ``render`` events for the page.

A turn's events pass through ``LiveRender`` on their way to the journal. Each ``token`` extends the
current text segment (a tool call starts a new one, as the page shows text after the tool's card);
the segment's Markdown so far is rendered with the same renderer as saved messages
(``api.render.render_markdown(partial=True)``) and appended as ``render {segment, html}``:

- at once when the previous render is older than the interval (the first token shows immediately),
- otherwise once the interval has passed since the previous render (one timer, never a backlog);
- and at ``close()``, so the last render holds the whole text before the turn's ``done``.

A long answer costs more to render each time; the interval grows to ``COST_FACTOR`` times the last
render's duration, so rendering never takes more than a fifth of the streaming thread's time.

Every ``render`` event carries the whole segment, so a page that reconnects mid-turn needs only the
last one of each segment.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from api.render import render_markdown

Sink = Callable[[str, dict], object]

RENDER_INTERVAL_S = 0.1
COST_FACTOR = 5.0


class LiveRender:
    """Wraps a turn's event sink; call it like the sink."""

    def __init__(self, sink: Sink, interval: float = RENDER_INTERVAL_S, clock=time.monotonic):
        self._sink = sink
        self._interval = interval
        self._clock = clock
        self._lock = threading.Lock()
        self._segments: list[list[str]] = [[]]
        self._rendered_len = 0  # characters of the current segment in its last render
        self._last_render = float("-inf")
        self._wait = interval  # the interval, stretched when renders get costly
        self._timer: threading.Timer | None = None
        self._closed = False

    def __call__(self, name: str, data: dict) -> None:
        self._sink(name, data)
        if name == "token" and data.get("text"):
            self._on_token(str(data["text"]))
        elif name == "tool":
            self._render_now()
            with self._lock:
                if self._segments[-1]:
                    self._segments.append([])
                    self._rendered_len = 0

    def close(self) -> None:
        """Render what has not been rendered yet; later tokens are passed on without renders."""
        self._render_now()
        with self._lock:
            self._closed = True
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None

    def _on_token(self, text: str) -> None:
        with self._lock:
            if self._closed:
                return
            self._segments[-1].append(text)
            wait = self._last_render + self._wait - self._clock()
            if wait > 0:
                if self._timer is None:
                    self._timer = threading.Timer(wait, self._render_now)
                    self._timer.daemon = True
                    self._timer.start()
                return
        self._render_now()

    def _render_now(self) -> None:
        with self._lock:
            self._timer = None
            if self._closed:
                return
            segment = len(self._segments) - 1
            text = "".join(self._segments[-1])
            if len(text) == self._rendered_len:
                return
            self._rendered_len = len(text)
            self._last_render = self._clock()
            # Rendered under the lock so two renders of one segment reach the sink in order.
            started = time.perf_counter()
            html = render_markdown(text, partial=True)
            self._wait = max(self._interval, COST_FACTOR * (time.perf_counter() - started))
            self._sink("render", {"segment": segment, "html": html, "chars": len(text)})

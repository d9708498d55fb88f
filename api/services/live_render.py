"""The answer being streamed, rendered as it grows: ``render`` events for the page.

A turn's events pass through ``LiveRender`` on their way to the journal. Each ``token`` extends the
current text segment (a tool call starts a new one, as the page shows text after the tool's card);
the segment's Markdown so far is rendered by the renderer of saved messages, block by block
(``api.services.partial_render``), and appended as a ``render`` patch (``api.rules.render_patches``) carrying only the
blocks that changed since the previous one:

- at once when the previous render is older than the interval (the first token shows immediately),
- otherwise once the interval has passed since the previous render (never a backlog), on the turn's one
  render thread: it is started with the first render that must wait and sleeps between renders, since
  a thread started per render costs as much CPU as the render itself;
- and at ``close()`` (or when a tool call ends the segment) as the finished text, so the last patch
  leaves the page showing what the saved message shows, before the turn's ``done``.

Only the unfinished last block is parsed again on each render; the interval still grows to
``COST_FACTOR`` times the last render's duration (a long last block, e.g. a huge code block), so
rendering never takes more than a fifth of the streaming thread's time.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from api.rules import render_patches
from api.rules.sanitize import scrub_surrogates
from api.services.partial_render import PartialDocument
from api.services.render import too_costly

Sink = Callable[[str, dict[str, Any]], object]

RENDER_INTERVAL_S = 0.1
COST_FACTOR = 5.0


class _Segment:
    """One stretch of text between tool calls and what the page was last sent of it."""

    def __init__(self) -> None:
        self.pieces: list[str] = []
        self.text = ""
        self.brackets = 0  # the text's "[", counted as it grows: the costly-text rule never reads it whole
        self.document = PartialDocument()
        self.shown: list[str] = []  # the blocks the page shows
        self.plain_sent: int | None = None  # characters sent as preformatted text, once too costly
        self.rendered: tuple[int, bool] = (0, False)  # (characters, finished) of the last render

    def current_text(self) -> str:
        if self.pieces:
            added = "".join(self.pieces)
            self.text += added
            self.brackets += added.count("[")
            self.pieces.clear()
        return self.text

    def patch(self, index: int, finished: bool) -> dict[str, Any] | None:
        """The ``render`` patch from what the page shows to the text now (None: nothing changed)."""
        text = self.current_text()
        if (len(text), finished) == self.rendered or not text:
            return None
        self.rendered = (len(text), finished)
        if self.plain_sent is not None or too_costly(len(text), self.brackets):
            # Trailing white space waits for what follows it: the saved answer ends without it.
            start, end = self.plain_sent or 0, len(text.rstrip())
            if end <= start:
                return None
            self.plain_sent = end
            return {"segment": index, "plain": text[start:end], "plain_from": start, "chars": len(text)}
        blocks = self.document.render(text, finished=finished)
        keep, changed = render_patches.diff(self.shown, blocks)
        if keep == len(self.shown) == len(blocks):
            return None
        self.shown = blocks
        return {"segment": index, "keep": keep, "blocks": changed, "chars": len(text)}


class LiveRender:
    """Wraps a turn's event sink; call it like the sink."""

    def __init__(
        self, sink: Sink, interval: float = RENDER_INTERVAL_S, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._sink = sink
        self._interval = interval
        self._clock = clock
        self._lock = threading.Condition()
        self._segments: list[_Segment] = [_Segment()]
        self._last_render = float("-inf")
        self._wait = interval  # the interval, stretched when renders get costly
        self._owed = False  # text arrived that waits for the interval to pass
        self._thread: threading.Thread | None = None
        self._idle = False  # the render thread waits for text (not for a deadline): wake it
        self._closed = False

    def __call__(self, name: str, data: dict[str, Any]) -> None:
        self._sink(name, data)
        if name == "token" and data.get("text"):
            self._on_token(str(data["text"]))
        elif name == "tool":
            with self._lock:
                self._render(finished=True)
                if self._segments[-1].text:
                    self._segments.append(_Segment())

    def close(self) -> None:
        """Render the finished text; later tokens are passed on without renders."""
        with self._lock:
            self._render(finished=True)
            self._closed = True
            self._segments = [_Segment()]  # the turn's journal outlives this; the texts are not needed
            self._lock.notify()

    def _on_token(self, text: str) -> None:
        with self._lock:
            if self._closed:
                return
            self._segments[-1].pieces.append(scrub_surrogates(text))
            if self._last_render + self._wait - self._clock() <= 0:
                self._render()
            elif not self._owed:
                self._owed = True
                if self._thread is None:
                    self._thread = threading.Thread(
                        target=self._render_when_due, name="live-render", daemon=True
                    )
                    self._thread.start()
                elif self._idle:
                    self._lock.notify()

    def _render_when_due(self) -> None:
        with self._lock:
            while not self._closed:
                wait = self._last_render + self._wait - self._clock()
                if wait > 0:  # sleeps to the deadline whether or not text is owed yet: more is on its way
                    self._lock.wait(wait)
                elif self._owed:
                    self._render()
                else:
                    self._idle = True
                    self._lock.wait()
                    self._idle = False

    def _render(self, finished: bool = False) -> None:
        """Send the patch of the text so far (the caller holds the lock, so patches reach the sink in order)."""
        self._owed = False
        if self._closed:
            return
        self._last_render = self._clock()
        started = time.perf_counter()
        patch = self._segments[-1].patch(len(self._segments) - 1, finished)
        self._wait = max(self._interval, COST_FACTOR * (time.perf_counter() - started))
        if patch is not None:
            self._sink("render", patch)

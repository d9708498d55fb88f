"""A turn's streamed text gathered into fewer events (pure): when a batch is sent, and how it is merged.

An agent worker sends each event of a turn over one pipe, and the server journals, renders and relays each
event it reads. Tokens come a word at a time, so the worker gathers them: a ``token`` or ``reasoning`` event
(``{text}`` only) goes into the turn's ``Batch``; consecutive ones of the same name become one event whose
text is theirs joined. The batch is due at once when nothing was sent for ``interval`` (the first token after
a pause shows without delay), else at the first multiple of ``interval`` at least ``interval`` after the
previous send, so the batches of every turn streaming in a worker fall due together and one wake of its
flusher sends them all; or at once past ``max_chars``. Any other event of the turn sends the batch first, so
the events keep their order; the clock is passed in.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

MERGED = frozenset({"token", "reasoning"})
MAX_CHARS = 64 * 1024  # text gathered before a batch is due whatever the interval

Event = tuple[str, dict[str, Any]]


def mergeable(name: str, data: dict[str, Any]) -> bool:
    """Whether the event is streamed text that may join its neighbours of the same name."""
    return name in MERGED and len(data) == 1 and isinstance(data.get("text"), str)


def merged(events: Iterable[Event]) -> list[Event]:
    """``events`` with each run of consecutive mergeable events of one name joined into one (order kept)."""
    out: list[Event] = []
    run: list[str] = []
    run_name = ""
    for name, data in events:
        if mergeable(name, data) and run and name == run_name:
            run.append(data["text"])
            continue
        if run:
            out.append((run_name, {"text": "".join(run)}))
            run = []
        if mergeable(name, data):
            run, run_name = [data["text"]], name
        else:
            out.append((name, data))
    if run:
        out.append((run_name, {"text": "".join(run)}))
    return out


class Batch:
    """One turn's streamed text not sent yet, and when it is due."""

    __slots__ = ("interval", "max_chars", "_events", "_chars", "_first_at", "_last_sent")

    def __init__(self, interval: float, max_chars: int = MAX_CHARS) -> None:
        self.interval = interval
        self.max_chars = max_chars
        self._events: list[Event] = []
        self._chars = 0
        self._first_at = 0.0
        self._last_sent = float("-inf")

    def __bool__(self) -> bool:
        return bool(self._events)

    def add(self, name: str, text: str, now: float) -> float:
        """Take a mergeable event that arrived at ``now``; when the batch is due."""
        if not self._events:
            self._first_at = now
        self._events.append((name, {"text": text}))
        self._chars += len(text)
        due = self.due()
        assert due is not None
        return due

    def due(self) -> float | None:
        """When the batch must be sent; None when it is empty."""
        if not self._events:
            return None
        earliest = self._last_sent + self.interval
        if self._chars >= self.max_chars or self.interval <= 0 or self._first_at >= earliest:
            return self._first_at
        return math.ceil(earliest / self.interval) * self.interval

    def take(self, now: float) -> list[Event]:
        """The batch as the events to send (merged), emptied; a send at ``now`` starts the next interval."""
        if not self._events:
            return []
        events, self._events, self._chars = merged(self._events), [], 0
        self._last_sent = now
        return events

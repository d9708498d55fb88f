"""A worker's turn events on their way to the server: streamed text batched per turn, every event in order.

The server reads a worker's frames on one thread and journals, renders and relays each event; a frame per
token made 32 streaming turns queue in the pipe. ``Batches`` gives each turn an ``emit`` that puts ``token``
and ``reasoning`` text into the turn's ``api.rules.token_batch.Batch`` and returns at once; one flusher thread
of the worker sends each batch, merged, when it is due (at once after a pause, else at most every
``interval``). Any other event, a question (``before_frame``) and the turn's end (``close``) send the turn's
batch first, under the turn's send lock, so the server reads the events in the order the agent made them.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from api.rules import token_batch

log = logging.getLogger("talaria.turn_batches")

Send = Callable[[dict[str, Any]], bool]


class _TurnEvents:
    def __init__(self, turn_id: str, interval: float, send: Send, clock: Callable[[], float]) -> None:
        self.turn_id = turn_id
        self._send = send
        self._clock = clock
        self._batch = token_batch.Batch(interval)
        self._lock = threading.Lock()  # the batch
        self.sending = threading.Lock()  # held while this turn's frames go out, so they go in order

    def add(self, name: str, text: str) -> float:
        with self._lock:
            return self._batch.add(name, text, self._clock())

    def due(self) -> float | None:
        with self._lock:
            return self._batch.due()

    def flush_locked(self) -> None:
        """Send the batch (the caller holds ``sending``)."""
        with self._lock:
            events = self._batch.take(self._clock())
        for name, data in events:
            self._send({"op": "event", "id": self.turn_id, "name": name, "data": data})

    def flush(self) -> None:
        with self.sending:
            self.flush_locked()


class Batches:
    """The batched turns of one worker process and their flusher thread."""

    def __init__(self, send: Send, interval: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._send = send
        self._interval = interval
        self._clock = clock
        self._cond = threading.Condition()
        self._turns: dict[str, _TurnEvents] = {}
        self._due: dict[str, float] = {}  # turn id → when its batch must go (non-empty batches only)
        self._closed = False
        self._thread: threading.Thread | None = None

    def emit(self, turn_id: str) -> Callable[[str, dict[str, Any]], None]:
        """The event sink of the turn ``turn_id``."""
        turn = _TurnEvents(turn_id, self._interval, self._send, self._clock)
        with self._cond:
            self._turns[turn_id] = turn

        def emit(name: str, data: dict[str, Any]) -> None:
            if self._interval > 0 and token_batch.mergeable(name, data):
                self._queue(turn, turn.add(name, data["text"]))
                return
            with turn.sending:
                turn.flush_locked()
                self._send({"op": "event", "id": turn_id, "name": name, "data": data})

        return emit

    def before_frame(self, turn_id: str) -> None:
        """Send the turn's batch now: a frame of the turn that is not an event (a question) follows."""
        with self._cond:
            turn = self._turns.get(turn_id)
        if turn is not None:
            turn.flush()

    def close(self, turn_id: str) -> None:
        """The turn ended: its batch is sent and it is forgotten."""
        with self._cond:
            turn = self._turns.pop(turn_id, None)
            self._due.pop(turn_id, None)
        if turn is not None:
            turn.flush()

    def flush_all(self) -> None:
        """Send every turn's batch now (the worker is stopping, or a turn was interrupted)."""
        with self._cond:
            turns = list(self._turns.values())
            self._due.clear()
        for turn in turns:
            turn.flush()

    def stop(self) -> None:
        self.flush_all()
        with self._cond:
            self._closed = True
            self._cond.notify()

    def _queue(self, turn: _TurnEvents, due: float) -> None:
        with self._cond:
            unattended = self._closed or turn.turn_id not in self._turns
            if not unattended:
                self._schedule_locked(turn.turn_id, due)
        if unattended:  # the turn ended or the worker stops: no flusher sends this text, so it goes now
            turn.flush()

    def _schedule_locked(self, turn_id: str, due: float) -> None:
        known = self._due.get(turn_id)
        if known is not None and known <= due:
            return
        earliest = min(self._due.values(), default=None)  # what the flusher sleeps until
        self._due[turn_id] = due
        if self._thread is None:
            self._thread = threading.Thread(target=self._flusher, name="token-batches", daemon=True)
            self._thread.start()
        elif earliest is None or due < earliest:
            self._cond.notify()

    def _flusher(self) -> None:
        while True:
            with self._cond:
                while True:
                    if self._closed:
                        return
                    now = self._clock()
                    ready = [tid for tid, due in self._due.items() if due <= now]
                    if ready:
                        break
                    self._cond.wait(min(self._due.values()) - now if self._due else None)
                turns = []
                for tid in ready:
                    del self._due[tid]
                    if tid in self._turns:
                        turns.append(self._turns[tid])
            for turn in turns:
                try:
                    turn.flush()
                except Exception:  # noqa: BLE001 - one turn's bad frame must not stop the other turns' text
                    log.exception("sending the streamed text of turn %s failed", turn.turn_id)
                due = turn.due()  # text that came while it was sent waits for the next interval
                if due is not None:
                    self._queue(turn, due)

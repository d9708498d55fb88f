"""The turns of this process: each turn's event journal, and which turn is live in which session.

A session file that says a turn is pending while no turn of this process is live in that session was
left so by a process that is gone or by a final save that failed (docs/turns.md, "Interrupted turns").
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING

from api.sanitize import scrub_surrogates

if TYPE_CHECKING:  # the type only: the journal holds a turn's runner, it never runs the agent
    from api.agent_turn import TurnRunner

_FINISHED_TTL_S = 600.0  # how long a finished turn's journal stays readable (a reconnecting tab replays it)


class Turn:
    """One chat turn's journal: ``(seq, name, data)`` events; readers wait on ``cond``."""

    def __init__(self, stream_id: str, session_id: str, user_text: str = "", user_ts: float | None = None):
        self.stream_id = stream_id
        self.session_id = session_id
        self.user_text = user_text
        self.user_ts = user_ts
        self.image_paths: list[str] = []  # attached images (absolute), for a model that can see them
        self.finished_at: float | None = None
        self.events: list[tuple[int, str, dict]] = []
        self.cond = threading.Condition()
        self.runner: TurnRunner | None = None
        self.cancel_requested = False
        self.stopped_by_shutdown = False
        self.partial_text: list[str] = []
        self.partial_reasoning: list[str] = []
        self.history_tokens: int | None = None

    @property
    def finished(self) -> bool:
        return self.finished_at is not None

    def append(self, name: str, data: dict) -> int:
        data = scrub_surrogates(data)  # the SSE writer encodes UTF-8: a lone surrogate would kill the stream
        with self.cond:
            seq = len(self.events) + 1
            self.events.append((seq, name, data))
            if name == "token":
                self.partial_text.append(data.get("text") or "")
            elif name == "reasoning":
                self.partial_reasoning.append(data.get("text") or "")
            self.cond.notify_all()
            return seq

    def finish(self) -> None:
        with self.cond:
            self.finished_at = time.time()
            self.cond.notify_all()

    def events_after(self, seq: int, timeout: float) -> tuple[list[tuple[int, str, dict]], bool]:
        """Events with a sequence number above ``seq`` (waiting up to ``timeout``), and whether the turn ended."""
        with self.cond:
            if len(self.events) <= seq and not self.finished:
                self.cond.wait(timeout)
            return self.events[max(seq, 0) :], self.finished


_TURNS: dict[str, Turn] = {}
_LIVE_BY_SESSION: dict[str, Turn] = {}
_LOCK = threading.Lock()


def start(turn: Turn) -> None:
    """Journal ``turn`` and make it its session's live turn (the caller holds the session lock).

    Journals finished long enough ago are dropped here, once a turn, not on every read."""
    with _LOCK:
        now = time.time()
        for key, old in list(_TURNS.items()):
            if old.finished_at and now - old.finished_at > _FINISHED_TTL_S:
                del _TURNS[key]
        _TURNS[turn.stream_id] = turn
        _LIVE_BY_SESSION[turn.session_id] = turn


def end(turn: Turn) -> None:
    """``turn`` is no longer live; its journal stays readable for a while."""
    with _LOCK:
        if _LIVE_BY_SESSION.get(turn.session_id) is turn:
            del _LIVE_BY_SESSION[turn.session_id]


def get_turn(stream_id: str) -> Turn | None:
    with _LOCK:
        return _TURNS.get(stream_id)


def live_turn_for(session_id: str) -> Turn | None:
    with _LOCK:
        return _LIVE_BY_SESSION.get(session_id)


def live_turns() -> list[Turn]:
    with _LOCK:
        return list(_LIVE_BY_SESSION.values())

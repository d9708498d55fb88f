"""The turns of this process: each turn's event journal, and which turn is live in which session.

A journal keeps what a reader that joins late or resumes (``Last-Event-ID``) needs, and a bounded amount
of it: a text segment's ``render`` patches (``api.render_patches``) are folded into one snapshot once
those that followed the last snapshot carry more than it does (and at least ``COMPACT_MIN_CHARS``). The
snapshot takes the sequence number of the newest patch it replaces, so a reader past that number has
everything, and one before it gets the snapshot, then what followed. A ``token`` that follows a token no
reader has been handed yet is added to it (up to ``TOKEN_MERGE_CHARS``) instead of becoming an event of
its own: a word-sized token costs ~300 bytes as an event, and no reader can resume inside an event it
never saw.

A session file that says a turn is pending while no turn of this process is live in that session was
left so by a process that is gone or by a final save that failed (docs/turns.md, "Interrupted turns").
"""

from __future__ import annotations

import bisect
import threading
import time
from typing import TYPE_CHECKING

from api import render_patches
from api.sanitize import scrub_surrogates

if TYPE_CHECKING:  # the type only: the journal holds a turn's runner, it never runs the agent
    from api.agent_turn import TurnRunner

_FINISHED_TTL_S = 600.0  # how long a finished turn's journal stays readable (a reconnecting tab replays it)
COMPACT_MIN_CHARS = 64_000  # render patches of a segment kept before they are folded into a snapshot
TOKEN_MERGE_CHARS = 4096  # the most text one journalled token event gathers


class _Renders:
    """One segment's render patches in the journal: its state so far and what the journal holds of it."""

    def __init__(self) -> None:
        self.state = render_patches.SegmentState()
        self.last_seq = 0
        self.snapshot_chars = 0
        self.patch_chars = 0  # of the patches after the snapshot


class Turn:
    """One chat turn's journal: ``(seq, name, data)`` events; readers wait on ``cond``."""

    def __init__(self, stream_id: str, session_id: str, user_text: str = "", user_ts: float | None = None):
        self.stream_id = stream_id
        self.session_id = session_id
        self.user_text = user_text
        self.user_ts = user_ts
        self.image_paths: list[str] = []  # attached images (absolute), for a model that can see them
        self.finished_at: float | None = None
        self.events: list[tuple[int, str, dict]] = []  # in sequence order; numbers skip folded patches
        self._next_seq = 1
        self._handed_out = 0  # the newest sequence number a reader has been given
        self._renders: dict[int, _Renders] = {}
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
            if name == "token" and self._add_to_last_token(data):
                self.partial_text.append(data.get("text") or "")
                self.cond.notify_all()
                return self.events[-1][0]
            seq = self._next_seq
            self._next_seq += 1
            if name == "render" and isinstance(data.get("segment"), int):
                self._journal_patch(seq, data)
            self.events.append((seq, name, data))
            if name == "token":
                self.partial_text.append(data.get("text") or "")
            elif name == "reasoning":
                self.partial_reasoning.append(data.get("text") or "")
            self.cond.notify_all()
            return seq

    def _add_to_last_token(self, data: dict) -> bool:
        if not self.events or set(data) != {"text"}:
            return False
        seq, name, last = self.events[-1]
        if name != "token" or seq <= self._handed_out or set(last) != {"text"}:
            return False
        text, more = last["text"] or "", data["text"] or ""
        if len(text) + len(more) > TOKEN_MERGE_CHARS:
            return False
        self.events[-1] = (seq, name, {"text": text + more})
        return True

    def _journal_patch(self, seq: int, patch: dict) -> None:
        renders = self._renders.setdefault(patch["segment"], _Renders())
        if renders.last_seq and renders.patch_chars > max(COMPACT_MIN_CHARS, renders.snapshot_chars):
            self._fold(patch["segment"], renders)
        render_patches.apply(renders.state, patch)
        renders.last_seq = seq
        renders.patch_chars += render_patches.size(patch)

    def _fold(self, segment: int, renders: _Renders) -> None:
        """Replace the segment's patches in the journal by one snapshot at the newest one's number."""
        snap = render_patches.snapshot(segment, renders.state)
        if renders.state.plain is not None:
            renders.state.plain = [snap["plain"]]
        kept: list[tuple[int, str, dict]] = []
        for event in self.events:
            seq, name, data = event
            if name == "render" and data.get("segment") == segment:
                if seq == renders.last_seq:
                    kept.append((seq, name, snap))
                continue
            kept.append(event)
        self.events = kept
        renders.snapshot_chars = render_patches.size(snap)
        renders.patch_chars = 0

    def finish(self) -> None:
        with self.cond:
            self.finished_at = time.time()
            self.cond.notify_all()

    def events_after(self, seq: int, timeout: float) -> tuple[list[tuple[int, str, dict]], bool]:
        """Events with a sequence number above ``seq`` (waiting up to ``timeout``), and whether the turn ended."""
        with self.cond:
            if (not self.events or self.events[-1][0] <= seq) and not self.finished:
                self.cond.wait(timeout)
            start = bisect.bisect_right(self.events, seq, key=lambda event: event[0])
            events = self.events[start:]
            if events:
                self._handed_out = max(self._handed_out, events[-1][0])
            return events, self.finished


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

"""The turns of this process: each turn's event journal, and which turn is live in which session.

A journal keeps what a reader that joins late or resumes (``Last-Event-ID``) needs, and a bounded amount
of it: a text segment's ``render`` patches (``api.rules.render_patches``) are folded into one snapshot once
those that followed the last snapshot carry more than it does (and at least ``COMPACT_MIN_CHARS``). The
snapshot takes the sequence number of the newest patch it replaces, so a reader past that number has
everything, and one before it gets the snapshot, then what followed. Consecutive ``token`` events are
kept as one text and the end of each (``_TokenRun``): as tuples and dicts, a word-sized token cost ~300
bytes, 32 MB for a 600 KB answer; readers get the same events either way.

A finished journal stays readable for ``_FINISHED_TTL_S`` seconds, and only the ``FINISHED_KEPT`` newest of
them: the server's memory stays flat however many turns it runs. A finished turn lets go of its runner (the
worker's request holds the model context).

A session file that says a turn is pending while no turn of this process is live in that session was
left so by a process that is gone or by a final save that failed (docs/turns.md, "Interrupted turns").
"""

from __future__ import annotations

import bisect
import shutil
import threading
import time
from array import array
from typing import TYPE_CHECKING, Any

from api.rules import render_patches
from api.rules.sanitize import scrub_surrogates
from api.store.in_use import InUse

if TYPE_CHECKING:  # the types only: the journal holds a turn's runner, it never runs the agent
    from api.agent.agent_turn import TurnRunner
    from api.agent.worker_pool import RemoteRunner

_FINISHED_TTL_S = 600.0  # how long a finished turn's journal stays readable (a reconnecting tab replays it)
# Finished journals kept at most, the newest: each holds its events and the session its ``done`` carries, so
# a busy server that finishes turns faster than they age out keeps this many, not every turn of the last 600 s.
FINISHED_KEPT = 64
COMPACT_MIN_CHARS = 64_000  # render patches of a segment kept before they are folded into a snapshot
RUN_MAX_TOKENS = 512  # tokens gathered before a run's text is joined and a new run starts

Event = tuple[int, str, dict[str, Any]]


class _TokenRun:
    """Consecutive ``token`` events (numbers ``first``, ``first + 1``, …): their texts joined into one,
    and where each ends. Open while its tokens arrive (``pieces``), then joined (``text``)."""

    __slots__ = ("first", "ends", "pieces", "text")

    def __init__(self, first: int) -> None:
        self.first = first
        self.ends = array("q")
        self.pieces: list[str] | None = []
        self.text = ""

    @property
    def last(self) -> int:
        return self.first + len(self.ends) - 1

    def add(self, text: str) -> bool:
        """Take the next token; False when this run is closed or full."""
        if self.pieces is None or len(self.pieces) >= RUN_MAX_TOKENS:
            return False
        self.pieces.append(text)
        self.ends.append((self.ends[-1] if self.ends else 0) + len(text))
        return True

    def close(self) -> None:
        if self.pieces is not None:
            self.text = "".join(self.pieces)
            self.pieces = None

    def events(self, after: int) -> list[Event]:
        first = max(after + 1 - self.first, 0)
        if self.pieces is not None:  # open: its pieces as they came, without joining the run per read
            return [
                (self.first + i, "token", {"text": self.pieces[i]}) for i in range(first, len(self.pieces))
            ]
        out = []
        for index in range(first, len(self.ends)):
            start = self.ends[index - 1] if index else 0
            out.append((self.first + index, "token", {"text": self.text[start : self.ends[index]]}))
        return out


Entry = Event | _TokenRun


def _first_seq(entry: Entry) -> int:
    return entry.first if isinstance(entry, _TokenRun) else entry[0]


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
        # A folder of this machine holding copies of a remote session's attached images; removed at the end.
        self.image_folder: str | None = None
        self.finished_at: float | None = None
        self._log: list[Entry] = []  # in sequence order; numbers skip folded patches
        self._next_seq = 1
        self._renders: dict[int, _Renders] = {}
        self.cond = threading.Condition()
        # Set once the turn ends: a reader gathering a tick of events waits on this, not on ``cond``, so each
        # event does not wake it.
        self._ended = threading.Event()
        self.runner: TurnRunner | RemoteRunner | None = None
        self.cancel_requested = False
        self.stopped_by_shutdown = False
        self.worker_lost = False  # the agent's worker process ended before the turn did
        self.partial_text: list[str] = []
        self.partial_reasoning: list[str] = []
        self.history_tokens: int | None = None
        self.work_cards: dict[
            str, dict[str, Any]
        ] = {}  # the newest state of each long-running work card (api.rules.work_cards)
        self.work_changes = 0  # how many times a card changed: a checkpoint saves the cards too

    @property
    def finished(self) -> bool:
        return self.finished_at is not None

    @property
    def events(self) -> list[Event]:
        """Every event the journal holds, in order."""
        with self.cond:
            return self._events_from(0)

    def append(self, name: str, data: dict[str, Any]) -> int:
        data = scrub_surrogates(data)  # the SSE writer encodes UTF-8: a lone surrogate would kill the stream
        with self.cond:
            seq = self._next_seq
            self._next_seq += 1
            last = self._log[-1] if self._log else None
            if name == "token" and set(data) == {"text"} and isinstance(data["text"], str):
                if not (isinstance(last, _TokenRun) and last.add(data["text"])):
                    if isinstance(last, _TokenRun):
                        last.close()
                    run = _TokenRun(seq)
                    run.add(data["text"])
                    self._log.append(run)
            else:
                if isinstance(last, _TokenRun):
                    last.close()
                if name == "render" and isinstance(data.get("segment"), int):
                    self._journal_patch(seq, data)
                self._log.append((seq, name, data))
            if name == "token":
                self.partial_text.append(data.get("text") or "")
            elif name == "reasoning":
                self.partial_reasoning.append(data.get("text") or "")
            elif name == "work" and isinstance(data.get("id"), str):
                self.work_cards[data["id"]] = data
                self.work_changes += 1
            self.cond.notify_all()
            return seq

    def _journal_patch(self, seq: int, patch: dict[str, Any]) -> None:
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
        kept: list[Entry] = []
        for entry in self._log:
            if (
                not isinstance(entry, _TokenRun)
                and entry[1] == "render"
                and entry[2].get("segment") == segment
            ):
                if entry[0] == renders.last_seq:
                    kept.append((entry[0], "render", snap))
                continue
            kept.append(entry)
        self._log = kept
        renders.snapshot_chars = render_patches.size(snap)
        renders.patch_chars = 0

    def finish(self) -> None:
        with self.cond:
            self.finished_at = time.time()
            self.runner = None  # nothing is left to interrupt or steer; it holds the turn's whole context
            if self._log and isinstance(self._log[-1], _TokenRun):
                self._log[-1].close()
            # Kept with the journal for a while; one string costs less than a token each.
            self.partial_text = ["".join(self.partial_text)] if self.partial_text else []
            self.partial_reasoning = ["".join(self.partial_reasoning)] if self.partial_reasoning else []
            self._ended.set()
            self.cond.notify_all()
        if self.image_folder is not None:
            shutil.rmtree(self.image_folder, ignore_errors=True)
            self.image_folder = None

    def wait_finished(self, timeout: float) -> bool:
        """Wait up to ``timeout`` for the turn to end (new events do not cut the wait short); whether it has."""
        return self._ended.wait(timeout)

    def events_after(self, seq: int, timeout: float) -> tuple[list[Event], bool]:
        """Events with a sequence number above ``seq`` (waiting up to ``timeout``), and whether the turn ended."""
        with self.cond:
            if self._next_seq - 1 <= seq and not self.finished:
                self.cond.wait(timeout)
            return self._events_from(seq), self.finished

    def _events_from(self, seq: int) -> list[Event]:
        start = bisect.bisect_right(self._log, seq, key=_first_seq)
        out: list[Event] = []
        previous = self._log[start - 1] if start else None
        if isinstance(previous, _TokenRun):  # a run that began at or before ``seq`` may reach past it
            out += previous.events(seq)
        for entry in self._log[start:]:
            if isinstance(entry, _TokenRun):
                out += entry.events(seq)
            else:
                out.append(entry)
        return out


class LiveTurns:
    """The turns of one app: each turn's journal by stream id (the ``FINISHED_KEPT`` newest finished ones, for
    ``_FINISHED_TTL_S`` at most), and the live turn of each session. The app builds one (``App.turns``) and puts it in use for the functions below."""

    def __init__(self) -> None:
        self._turns: dict[str, Turn] = {}
        self._live_by_session: dict[str, Turn] = {}
        self._lock = threading.Lock()

    def start(self, turn: Turn) -> None:
        """Journal ``turn`` and make it its session's live turn (the caller holds the session lock).

        Journals finished long enough ago, or past the ``FINISHED_KEPT`` newest, are dropped here, once a turn,
        not on every read."""
        with self._lock:
            now = time.time()
            finished = [key for key, old in self._turns.items() if old.finished_at is not None]
            finished.sort(key=lambda key: self._turns[key].finished_at or 0.0)
            over = len(finished) - FINISHED_KEPT
            for index, key in enumerate(finished):
                finished_at = self._turns[key].finished_at or 0.0
                if index < over or now - finished_at > _FINISHED_TTL_S:
                    del self._turns[key]
            self._turns[turn.stream_id] = turn
            self._live_by_session[turn.session_id] = turn

    def end(self, turn: Turn) -> None:
        """``turn`` is no longer live; its journal stays readable for a while."""
        with self._lock:
            if self._live_by_session.get(turn.session_id) is turn:
                del self._live_by_session[turn.session_id]

    def get_turn(self, stream_id: str) -> Turn | None:
        with self._lock:
            return self._turns.get(stream_id)

    def live_turn_for(self, session_id: str) -> Turn | None:
        with self._lock:
            return self._live_by_session.get(session_id)

    def latest_for(self, session_id: str) -> Turn | None:
        """The session's newest turn of this app, live or finished (while its journal is kept)."""
        with self._lock:
            return next((t for t in reversed(self._turns.values()) if t.session_id == session_id), None)

    def live_turns(self) -> list[Turn]:
        with self._lock:
            return list(self._live_by_session.values())


TURNS: InUse[LiveTurns] = InUse(LiveTurns)  # the app's (``App.turns``), else one built on first use


def start(turn: Turn) -> None:
    """Journal ``turn`` and make it its session's live turn (the caller holds the session lock)."""
    TURNS.get().start(turn)


def end(turn: Turn) -> None:
    """``turn`` is no longer live; its journal stays readable for a while."""
    TURNS.get().end(turn)


def get_turn(stream_id: str) -> Turn | None:
    return TURNS.get().get_turn(stream_id)


def live_turn_for(session_id: str, *, turns: LiveTurns | None = None) -> Turn | None:
    """The session's live turn among ``turns`` (the caller's app's), else among the live turns in use."""
    return TURNS.get(turns).live_turn_for(session_id)


def latest_for(session_id: str) -> Turn | None:
    """The session's newest turn of this app, live or finished (while its journal is kept)."""
    return TURNS.get().latest_for(session_id)


def live_turns() -> list[Turn]:
    return TURNS.get().live_turns()

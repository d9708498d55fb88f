"""The sidebar's change feed: every save or removal of a session, numbered (relayed by ``api.web.sse``).

The index (``api.store.session_index``) reports each changed row; the feed keeps the newest change per
session, numbered, for the last ``HISTORY`` sessions. A tab loads ``GET /api/sessions`` (which carries
``feed_seq``), then follows ``GET /api/sessions/feed?after=<feed_seq>``:

    id: 42
    event: sessions
    data: {"upsert": [sidebar row...], "remove": [session_id...]}

A tab that fell further behind than the history gets ``event: reset`` and loads the list again.
When the agent's own sessions in ``state.db`` change (``api.services.agent_watch``), their whole list follows:

    id: 43
    event: agent_sessions
    data: {"agent_sessions": [agent row...]}
"""

from __future__ import annotations

import collections
import threading
import time
from typing import Any

from api.services import session_list
from api.store.in_use import InUse

HISTORY = 2000


class ChangeLog:
    """The newest change per session, numbered; waiters wake on each change."""

    def __init__(self, history: int = HISTORY, start: int = 0):
        self.history = history
        # Numbers start where the clock is (ms), so a tab still holding a number from an earlier run of
        # the server is below the floor and reloads rather than missing what changed in between.
        self.seq = start
        self.floor = start  # changes numbered at or below this are forgotten
        self.closed = False
        self._changes: collections.OrderedDict[str, tuple[int, dict[str, Any] | None]] = (
            collections.OrderedDict()
        )
        self._agent: tuple[int, list[dict[str, Any]]] | None = None  # the agent's sessions as last changed
        self._cond = threading.Condition()

    def record(self, sid: str, row: dict[str, Any] | None) -> None:
        """``row`` None means the session is gone."""
        with self._cond:
            self.seq += 1
            self._changes[sid] = (self.seq, None if row is None else session_list.sidebar_row(row))
            self._changes.move_to_end(sid)
            while len(self._changes) > self.history:
                _, (dropped, _) = self._changes.popitem(last=False)
                self.floor = dropped
            self._cond.notify_all()

    def record_agent_sessions(self, rows: list[dict[str, Any]]) -> None:
        """The agent's own sessions changed: ``rows`` is their whole sidebar list now."""
        with self._cond:
            self.seq += 1
            self._agent = (self.seq, rows)
            self._cond.notify_all()

    def agent_sessions_since(self, after: int) -> list[dict[str, Any]] | None:
        """The agent's sessions if they changed after ``after``, else None."""
        with self._cond:
            return self._agent[1] if self._agent is not None and self._agent[0] > after else None

    def reset(self) -> None:
        """Forget everything (the index was rebuilt behind the feed): every follower loads the list again."""
        with self._cond:
            self.seq += 1
            self.floor = self.seq
            self._changes.clear()
            self._cond.notify_all()

    def close(self) -> None:
        with self._cond:
            self.closed = True
            self._cond.notify_all()

    def since(self, after: int) -> tuple[int, dict[str, Any] | None]:
        """``(seq, {"upsert", "remove"})`` of what changed after ``after``; None when that is forgotten."""
        with self._cond:
            if after < self.floor or after > self.seq:
                return self.seq, None
            upsert, remove = [], []
            for sid, (seq, row) in reversed(self._changes.items()):
                if seq <= after:
                    break
                if row is None:
                    remove.append(sid)
                else:
                    upsert.append(row)
            return self.seq, {"upsert": upsert, "remove": remove}

    def wait(self, after: int, timeout: float) -> None:
        with self._cond:
            self._cond.wait_for(lambda: self.seq != after or self.closed, timeout)


def new_log() -> ChangeLog:
    """A feed numbered from now (ms): a tab holding a number from an earlier server is behind and reloads."""
    return ChangeLog(start=time.time_ns() // 1_000_000)


CHANGES: InUse[ChangeLog] = InUse(new_log)  # the app's (``App.feed``), else one built on first use


def changes() -> ChangeLog:
    """The feed in use."""
    return CHANGES.get()

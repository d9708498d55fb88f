"""Following the agent as it writes ``state.db``: a thread checks the database's files every
``POLL_S`` (a stat of ``state.db`` and ``-wal``, no connection), and when they changed, lists the
agent's sessions again through the read-only reader; a list that differs from the last one goes to every
tab through the sidebar feed (``api.services.session_feed``). A continuation made here changes the list too
(``poke``)."""

from __future__ import annotations

import logging
import threading
from typing import Any

from api.agent import agent_sessions
from api.services import session_feed, session_views
from api.store import models, state_db
from api.store.in_use import InUse

log = logging.getLogger("talaria.admin")

POLL_S = 1.0


class AgentWatch:
    """One app's watch of the agent's sessions (``App.agent_watch``), put in use: its thread, the files' stamp and
    the list it last saw."""

    def __init__(self, poll_s: float = POLL_S) -> None:
        self.poll_s = poll_s
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._stamp: object = None
        self._rows: list[dict[str, Any]] | None = None
        self._store: models.Store | None = None
        self._feed: session_feed.ChangeLog | None = None
        self._agent_rows: session_views.AgentRows | None = None

    def start(
        self,
        *,
        store: models.Store | None = None,
        feed: session_feed.ChangeLog | None = None,
        agent_rows: session_views.AgentRows | None = None,
    ) -> None:
        """Follow the agent's sessions not continued in ``store``, telling ``feed`` and ``agent_rows`` (the app's;
        those in use when None) when they change."""
        self._store, self._feed, self._agent_rows = store, feed, agent_rows
        self._rows = agent_sessions.agent_sessions(store=store)
        self._stamp = state_db.files_stamp()
        self._thread = threading.Thread(target=self._run, name="agent-watch", daemon=True)
        self._thread.start()

    def poke(self) -> None:
        """List again at once, whatever the files say (a change of ours, not the agent's)."""
        self._stamp = None
        self._wake.set()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(5.0)

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self.poll_s)
            self._wake.clear()
            try:
                self.check()
            except Exception:  # noqa: BLE001 - a failed look is tried again on the next tick
                log.exception("following the agent's sessions failed")

    def check(self) -> None:
        stamp = state_db.files_stamp()
        if stamp == self._stamp:
            return
        self._stamp = stamp
        rows = agent_sessions.agent_sessions(store=self._store)
        if rows != self._rows:
            self._rows = rows
            # A page read after the feed's news holds the news too.
            session_views.forget_agent_rows(self._agent_rows)
            session_feed.CHANGES.get(self._feed).record_agent_sessions(rows)


WATCH: InUse[AgentWatch] = InUse(AgentWatch)  # the app's (``App.agent_watch``), else built on first use


def poke() -> None:
    """List again at once, whatever the files say (a change of ours, not the agent's)."""
    WATCH.get().poke()

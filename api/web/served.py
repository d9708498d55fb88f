"""The app a request is served by, for the routes to pass its objects down to the domain functions.

A route reads it from its server (``handler.server.app``). hermes-webui's tests call route handlers directly
with a handler outside any server (``api.routes._handle_session_compress(handler, body)``): such a request is
served by what is in use (``InUseApp``), the objects the default app put in use, or fresh ones when none did.
"""

from __future__ import annotations

from http.server import BaseHTTPRequestHandler
from typing import TYPE_CHECKING, Any, cast

from api.agent import (
    agent_answers,
    agent_pool,
    approvals,
    clarify,
    cron_ticker,
    mcp_servers,
    turn_journal,
    worker_pool,
)
from api.services import (
    agent_import,
    agent_watch,
    compression,
    environment_workers,
    goal_loop,
    search_indexer,
    session_feed,
    session_views,
    streaming,
)
from api.store import models
from api.store.in_use import InUse

if TYPE_CHECKING:
    from api.server.app import App


class InUseApp:
    """What a request outside a server is served by: each object the routes pass down, read from its slot in use
    at each use, under the app's name for it (no login, no startup summary)."""

    auth = None
    startup_recovery = None
    _slots: dict[str, InUse[Any]] = {
        "turns": turn_journal.TURNS,
        "jobs": compression.JOBS,
        "work": streaming.WORK,
        "feed": session_feed.CHANGES,
        "agent_rows": session_views.AGENT_ROWS,
        "import_lock": agent_import.IMPORT_LOCK,
        "approvals": approvals.QUESTIONS,
        "yolo": approvals.YOLO,
        "clarify": clarify.QUESTIONS,
        "goal_locks": goal_loop.LOCKS,
        "agent_answers": agent_answers.ANSWERS,
        "workers": worker_pool.POOL,
        "agents": agent_pool.AGENTS,
        "agent_watch": agent_watch.WATCH,
        "environment_pools": environment_workers.POOLS,
        "discovery": mcp_servers.DISCOVERY,
        "cron_ticker": cron_ticker.TICKER,
        "indexing": search_indexer.INDEXING,
    }

    def __getattr__(self, name: str) -> Any:
        if name == "store":
            return models.store()
        slot = self._slots.get(name)
        if slot is None:
            raise AttributeError(name)
        return slot.get()


def app_of(handler: BaseHTTPRequestHandler) -> App:
    """The app serving this request: its server's, else what is in use (a handler outside a server)."""
    app = getattr(getattr(handler, "server", None), "app", None)
    # The in-use view answers every name the routes read of an app, so it stands for one.
    return cast("App", app if app is not None else InUseApp())

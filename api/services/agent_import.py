"""Continuing one of the agent's own conversations (CLI, Telegram...) in Talaria (hermes-webui's
``POST /api/session/import_cli``).

The continuation is a new Talaria session with its own id holding the whole history of the agent's
conversation (every compression segment, oldest first) and naming the agent's newest segment in
``agent_session_id``; the agent's rows in ``state.db`` are only read. Its first turn's model context is
that history, as for a branch. Asking again for a conversation already continued answers the same session.
"""

from __future__ import annotations

import copy
import threading
import time
from typing import Any

from api.agent.agent_sessions import agent_session, continued_agent_ids
from api.rules.errors import NotFound
from api.rules.session_fields import is_safe_session_id
from api.services import agent_watch
from api.services.session_catalogue import save_new
from api.services.session_views import AgentRows, forget_agent_rows, full_session
from api.store import models
from api.store.in_use import InUse

# One import at a time in an app (``App.import_lock``): two clicks on the same conversation must not make two
# continuations.
IMPORT_LOCK: InUse[threading.Lock] = InUse(threading.Lock)
# Keys that name rows of the agent's session, meaningless in another one.
_AGENT_ROW_KEYS = ("_state_db_row_id",)


def _existing_continuation(segments: list[str], store: models.Store | None) -> models.Session | None:
    wanted = set(segments)
    for row in models.store(store).newest_first():
        if continued_agent_ids([row]) & wanted:
            return models.get_session(row["session_id"], store=store)
    return None


def _history(messages: list[Any]) -> list[dict[str, Any]]:
    rows = []
    for msg in copy.deepcopy(messages):
        if isinstance(msg, dict):
            for key in _AGENT_ROW_KEYS:
                msg.pop(key, None)
            rows.append(msg)
    return rows


def import_agent_session(
    sid: str,
    *,
    lock: threading.Lock | None = None,
    agent_rows: AgentRows | None = None,
    store: models.Store | None = None,
    watch: agent_watch.AgentWatch | None = None,
) -> dict[str, Any]:
    """The Talaria session continuing agent conversation ``sid`` (made now, or the one made before), under
    ``lock``; ``agent_rows`` lists the agent's sessions again and ``watch`` lists them anew (the app's; those in use
    when None)."""
    if not is_safe_session_id(sid):
        raise NotFound("Session not found")
    with IMPORT_LOCK.get(lock):
        agent = agent_session(sid, store=store)
        if agent is None:
            raise NotFound("Session not found")
        segments = agent["agent_segments"]
        existing = _existing_continuation(segments, store)
        if existing is not None:
            return full_session(existing)
        now = time.time()
        session_payload = save_new(
            models.Session(
                title=agent["title"],
                messages=_history(agent["messages"]),
                agent_session_id=segments[-1],
                raw_source=agent["source"],
                created_at=now,
                updated_at=now,
            ),
            store=store,
        )
    forget_agent_rows(agent_rows)
    # Every tab's sidebar drops the agent's row for the continued one.
    agent_watch.WATCH.get(watch).poke()
    return session_payload

"""Sessions as the page shows them (HTTP-free): a session with a page of rendered messages, the sidebar
list and its pages, and the agent's own sessions from ``state.db`` (read-only rows).

Changes to sessions live in ``api.services.session_catalogue``; this module only reads. A Talaria session is
snapshotted under its lock (``api.store.session_edit.lock``) and rendered
outside the lock.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from api.agent.agent_sessions import agent_session, agent_sessions, continued_agent_ids
from api.rules import version_rules
from api.rules.anchor import anchor_message_index
from api.rules.errors import NotFound
from api.services import session_feed, session_list
from api.services.render import render_message
from api.store import models, projects, session_edit
from api.store.in_use import InUse
from api.store.session_lookup import load_session

log = logging.getLogger("talaria.admin")

DISPLAY_ROLES = frozenset({"user", "assistant"})
# Extra keys of a "full session" beyond the sidebar row (docs/http-api.md).
_FULL_FIELDS = (
    "tool_calls",
    "context_length",
    "last_prompt_tokens",
    "compression_generation",
    "reasoning_effort",
    "environment",
    "environment_workspace",
    "queued_messages",
)


# ---------------------------------------------------------------------- one session


def is_display_role(role: Any) -> bool:
    """User and assistant rows are the text a person reads (rendered here, searched by the catalogue)."""
    return isinstance(role, str) and role in DISPLAY_ROLES


def display_message(msg: dict[str, Any], idx: int) -> dict[str, Any]:
    """A stored message plus ``_idx`` and, for user/assistant text, the sanitized ``html``."""
    out = dict(msg)
    out["_idx"] = idx
    if is_display_role(msg.get("role")):
        try:
            rendered = render_message(msg)
        except Exception:  # noqa: BLE001 - a renderer failure must not hide the transcript
            log.exception("rendering message %d failed", idx)
            rendered = None
        if rendered:
            out["html"] = rendered.get("html")
    return out


def page_bounds(total: int, msg_limit: int | None, msg_before: int | None) -> tuple[int, int]:
    """``[start, end)`` of the page: the last ``msg_limit`` messages with ``_idx < msg_before``."""
    end = total if msg_before is None else max(0, min(msg_before, total))
    start = 0 if msg_limit is None else max(0, end - msg_limit)
    return start, end


def _paged_messages(messages: list[Any], msg_limit: int | None, msg_before: int | None) -> dict[str, Any]:
    start, end = page_bounds(len(messages), msg_limit, msg_before)
    page = [display_message(m, i) for i, m in enumerate(messages[start:end], start) if isinstance(m, dict)]
    return {"messages": page, "has_more_before": start > 0, "total_messages": len(messages)}


def full_session(
    session: models.Session, msg_limit: int | None = None, msg_before: int | None = None
) -> dict[str, Any]:
    """The sidebar row plus a page of messages and the context fields the page shows."""
    with session_edit.lock(session.session_id, store=session.home()):  # a consistent snapshot
        row = session.compact()
        messages = list(session.messages)
        for name in _FULL_FIELDS:
            value = getattr(session, name, None)
            row[name] = list(value) if isinstance(value, list) else value
        row["can_uncompress"] = isinstance(getattr(session, "compression_undo", None), dict)
        row["message_versions"] = version_rules.summary(version_rules.groups_of(session.message_versions))
        details = session.compression_anchor_details
        row["compression_anchor_idx"] = anchor_message_index(
            messages,
            session.compression_anchor_message_key,
            session.compression_anchor_visible_idx,
            details.get("message_idx") if isinstance(details, dict) else None,
        )
    row.update(_paged_messages(messages, msg_limit, msg_before))
    return row


def full_session_by_id(
    sid: str, msg_limit: int | None = None, *, store: models.Store | None = None
) -> dict[str, Any]:
    return full_session(load_session(sid, store=store), msg_limit)


def get_session_payload(
    sid: str,
    msg_limit: int | None = None,
    msg_before: int | None = None,
    *,
    store: models.Store | None = None,
) -> dict[str, Any]:
    """``{"session": full}`` for a Talaria session, or a read-only agent session from ``state.db``."""
    try:
        session = load_session(sid, store=store)
    except NotFound:
        agent = agent_session(sid, store=store)
        if agent is None:
            raise
        messages = agent.pop("messages")
        agent.update(_paged_messages(messages, msg_limit, msg_before))
        return {"session": agent}
    return {"session": full_session(session, msg_limit, msg_before)}


# ---------------------------------------------------------------------- the sidebar


def list_sessions(*, store: models.Store | None = None) -> dict[str, Any]:
    rows = models.all_sessions(store=store)
    talaria = {row["session_id"] for row in rows}
    return {
        "sessions": rows,
        "agent_sessions": agent_sessions(talaria.__contains__, continued_agent_ids(rows), store=store),
    }


# The agent writes state.db all through a turn, so its stat-keyed cache misses on nearly every request
# while turns stream; the first page reuses the agent's rows for a moment instead of a query each time.
AGENT_ROWS_MAX_AGE_S = 2.0


class AgentRows:
    """The agent's rows the first page showed last (those not continued in ``store``, the app's; the store in
    use when None), and when they were read. The app owns one (``App.agent_rows``), put in use."""

    def __init__(self, store: models.Store | None = None) -> None:
        self._store = store
        self._at = -AGENT_ROWS_MAX_AGE_S
        self._rows: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def recent(self) -> list[dict[str, Any]]:
        with self._lock:
            if time.monotonic() - self._at >= AGENT_ROWS_MAX_AGE_S:
                self._rows = agent_sessions(store=self._store)
                self._at = time.monotonic()
            return self._rows

    def forget(self) -> None:
        """The agent's rows changed here (a continuation): the next page lists them again."""
        with self._lock:
            self._at = -AGENT_ROWS_MAX_AGE_S


AGENT_ROWS: InUse[AgentRows] = InUse(AgentRows)  # the app's (``App.agent_rows``), else built on first use


def forget_agent_rows(agent_rows: AgentRows | None = None) -> None:
    """The agent's rows changed here (a continuation): the next page lists them again."""
    AGENT_ROWS.get(agent_rows).forget()


def sessions_page_json(
    limit: int | None = None,
    cursor: str | None = None,
    project_id: str | None = None,
    *,
    feed: session_feed.ChangeLog | None = None,
    agent_rows: AgentRows | None = None,
    store: models.Store | None = None,
) -> list[bytes]:
    """A page of sidebar rows (``api.services.session_list``) with ``feed_seq`` of ``feed`` and, on the first
    page, the agent's own sessions (as ``agent_rows`` last listed them; ``feed`` and ``agent_rows`` are the
    app's, those in use when None); as chunks to send in order. With ``project_id``, that project's rows only
    (the agent's sessions belong to no project)."""
    project = None if project_id is None else projects.clean_project_id(project_id)
    # Read before the rows: a change after this number reaches the tab through the feed.
    extra: dict[str, Any] = {"feed_seq": session_feed.CHANGES.get(feed).seq}
    if cursor is None:
        extra["agent_sessions"] = [] if project is not None else AGENT_ROWS.get(agent_rows).recent()
    return session_list.page_json(limit, cursor, extra, project, store=store)

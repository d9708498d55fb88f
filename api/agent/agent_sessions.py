"""The agent's own sessions (CLI, Telegram, cron...) as the page shows them, read-only from ``state.db``.

A conversation the agent compressed is several ``sessions`` rows chained by ``parent_session_id``; it is
shown as one row, its newest segment, with the history of every segment. A conversation continued in
Talaria (``POST /api/session/import_cli``) is a Talaria session naming it in ``agent_session_id``; the
sidebar then shows that session, not the agent's rows.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

from api.rules.session_fields import is_safe_session_id
from api.store import models, state_db, tombstones

log = logging.getLogger("talaria.admin")

# Sources whose runs are machine-made; the page hides them until the person asks.
HIDDEN_BY_DEFAULT_SOURCES = ("cron", "webhook")


def _agent_row(raw: Any) -> dict[str, Any] | None:
    if not isinstance(raw, dict):
        return None
    sid = raw.get("id") or raw.get("session_id")
    if not is_safe_session_id(sid):
        return None
    title = raw.get("title")
    count = raw.get("message_count")
    return {
        "id": sid,
        "title": title if isinstance(title, str) and title.strip() else f"Agent session {sid[:12]}",
        "source": raw.get("source"),
        "model": raw.get("model"),
        "started_at": raw.get("started_at"),
        "message_count": count if isinstance(count, int) and not isinstance(count, bool) else None,
        "read_only": True,
    }


def _raw_agent_sessions(home: models.Store) -> list[Any]:
    """The agent's sessions in state.db, kept between reads in what ``home`` keeps of the database."""
    try:
        rows = state_db.list_agent_sessions(reads=home.agent_db)
    except Exception as exc:  # noqa: BLE001 - state.db is optional and read-only: unreadable = absent
        log.warning("listing agent sessions from state.db failed: %s", exc)
        return []
    return rows if isinstance(rows, list) else []


def _by_id(raw: list[Any]) -> dict[str, dict[str, Any]]:
    return {item["id"]: item for item in raw if isinstance(item, dict) and isinstance(item.get("id"), str)}


def _lineage_row(
    row: dict[str, Any], segments: list[str], raw_by_id: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    """The newest segment's row speaking for its conversation: the newest title any segment has, the
    messages of all of them."""
    older = [raw_by_id[sid] for sid in segments[1:] if sid in raw_by_id]
    own_title = raw_by_id.get(segments[0], {}).get("title")
    if not (isinstance(own_title, str) and own_title.strip()):
        titles = [t for r in older if isinstance(t := r.get("title"), str) and t.strip()]
        if titles:
            row["title"] = titles[0]
    counts = [c for r in older if isinstance(c := r.get("message_count"), int) and not isinstance(c, bool)]
    if row["message_count"] is not None:
        row["message_count"] += sum(counts)
    row["segments"] = len(segments)
    return row


def _segments_of(sid: str, parents: dict[str, str]) -> list[str]:
    """``sid`` and the segments it continues, newest first (the parent map of ``state_db.compression_parents``)."""
    chain = [sid]
    while chain[-1] in parents and parents[chain[-1]] not in chain:
        chain.append(parents[chain[-1]])
    return chain


def continued_agent_ids(rows: Iterable[dict[str, Any]]) -> set[str]:
    """The agent sessions that Talaria sessions (their sidebar rows) continue."""
    return {sid for row in rows if isinstance(sid := row.get("agent_session_id"), str)}


def agent_sessions(
    is_talaria: Callable[[str], bool] | None = None,
    continued: set[str] | None = None,
    *,
    store: models.Store | None = None,
) -> list[dict[str, Any]]:
    """Conversations only the agent knows (CLI, other platforms), one row per compression lineage, minus
    Talaria's own, deleted and continued ones (those of ``store``, the caller's app's; the store in use when
    None).

    Rows with source ``webui`` are left out too: they are web UI sessions (ours, ids the agent rotated
    during a compaction, or deleted ones), which the recovery audit reports when a sidecar is missing.
    """
    home = models.store(store)
    raw = _raw_agent_sessions(home)
    if not raw:
        return []
    if is_talaria is None:
        is_talaria = home.has_row
    if continued is None:
        continued = continued_agent_ids(home.newest_first())
    parents = state_db.compression_parents()
    superseded = set(parents.values())  # a segment that a later one continues is not a row of its own
    deleted = tombstones.read_deleted_ids(home.session_dir, home.tombstones)
    raw_by_id = _by_id(raw)
    out = []
    for item in raw:
        row = _agent_row(item)
        if row is None or row["source"] == "webui" or row["id"] in superseded:
            continue
        segments = _segments_of(row["id"], parents)
        if is_talaria(row["id"]) or deleted.intersection(segments) or continued.intersection(segments):
            continue
        if len(segments) > 1:
            row = _lineage_row(row, segments, raw_by_id)
        out.append(row)
    return out


def agent_session(sid: str, *, store: models.Store | None = None) -> dict[str, Any] | None:
    """A read-only agent conversation with every segment's messages, or None (no state.db, no such
    session, deleted here: in ``store``'s folder, the caller's app's)."""
    home = models.store(store)
    if sid in tombstones.read_deleted_ids(home.session_dir, home.tombstones):
        return None
    try:
        segments, messages = state_db.lineage_messages(sid)
    except Exception as exc:  # noqa: BLE001
        log.warning("reading agent session %s from state.db failed: %s", sid, exc)
        return None
    if not isinstance(messages, list) or not messages:
        return None
    raw_by_id = _by_id(_raw_agent_sessions(home))
    meta = _agent_row(raw_by_id.get(sid) or {"id": sid})
    if meta is None:  # not a session id
        return None
    if len(segments) > 1:
        meta = _lineage_row(meta, segments[::-1], raw_by_id)
    return {
        "session_id": sid,
        "title": meta["title"],
        "model": meta["model"],
        "source": meta["source"],
        "created_at": raw_by_id.get(segments[0], meta).get("started_at"),
        "read_only": True,
        "agent_segments": segments,
        "message_count": len(messages),
        "can_uncompress": False,
        "messages": messages,
    }


def sessions_matching(needle: str, limit: int, *, store: models.Store | None = None) -> list[dict[str, Any]]:
    """Agent conversations (their sidebar rows, as ``agent_sessions`` lists them for ``store``) holding a
    message that the agent's full-text index matches with ``needle``, each with its ``messages``; at most
    ``limit``."""
    hits = state_db.search_session_ids(needle, limit=limit * 4)
    if not hits:
        return []
    rows = {row["id"]: row for row in agent_sessions(store=store)}
    parents = state_db.compression_parents()
    children = {parent: child for child, parent in parents.items()}
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for sid in hits:
        tip = sid
        while tip in children and tip not in seen:
            tip = children[tip]
        if tip in seen or tip not in rows:
            continue
        seen.add(tip)
        agent = agent_session(tip, store=store)
        if agent is not None:
            out.append({**rows[tip], "messages": agent["messages"]})
        if len(out) >= limit:
            break
    return out

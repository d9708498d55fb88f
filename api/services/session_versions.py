"""Switching between the versions of an edited or regenerated message (docs/session-model.md, "Versions").

A switch is two durable writes: first the shown tail is kept in a new file beside the session
(``api/store/version_store.py``), then the session file is saved with the chosen version's rows and context in
place of it. A crash between them leaves the session as it was (the new kept file is named by nothing);
the session file itself is replaced atomically. So the file always holds one whole version.
"""

from __future__ import annotations

from typing import Any

from api.agent import interrupted_turns, turn_journal
from api.rules import version_rules
from api.rules.errors import BadRequest, Conflict
from api.rules.messages import message_text
from api.services import session_ops
from api.store import models, version_store
from api.store.session_edit import edit, lock
from api.store.session_lookup import load_session

_PREVIEW_CHARS = 120


def _index(value: Any) -> int:
    if isinstance(value, str) and value.isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise BadRequest("message_index must be a non-negative integer")
    return value


def _group(groups: list[dict[str, Any]], index: int) -> dict[str, Any]:
    _before, at, _after = version_rules.split_at(groups, index)
    if at is None:
        raise BadRequest("This message has no other versions.")
    return at


def _preview(rows: list[Any]) -> dict[str, Any]:
    first = next((m for m in rows if isinstance(m, dict) and m.get("role") == "user"), None)
    answer = next((m for m in rows if isinstance(m, dict) and m.get("role") == "assistant"), None)
    return {
        "message_count": len(rows),
        "user_text": message_text(first)[:_PREVIEW_CHARS] if first else "",
        "answer_text": message_text(answer)[:_PREVIEW_CHARS] if answer else "",
    }


def list_versions(sid: str, message_index: Any, *, store: models.Store | None = None) -> dict[str, Any]:
    """The versions of the message at ``message_index``: which is shown, and a preview of each."""
    index = _index(message_index)
    with lock(sid, store=store):
        session = load_session(sid, store=store)
        at = _group(version_rules.groups_of(session.message_versions), index)
        versions = []
        for number, slot in enumerate(at["versions"]):
            rows = (
                session.messages[index:]
                if slot is None
                else version_store.load(session.path, slot)["messages"]
            )
            versions.append({"version": number, "current": slot is None, **_preview(rows)})
    return {"session_id": sid, "message_index": index, "current": at["current"], "versions": versions}


def switch_version(
    sid: str,
    message_index: Any,
    version: Any,
    *,
    store: models.Store | None = None,
    turns: turn_journal.LiveTurns | None = None,
) -> dict[str, Any]:
    """Show version ``version`` of the message at ``message_index``; the shown one is kept as a version."""
    index = _index(message_index)
    with edit(sid, store=store) as session:
        interrupted_turns.close_unless_live(session, interrupted_turns.STILL_STREAMING, turns=turns)
        groups = version_rules.groups_of(session.message_versions)
        at = _group(groups, index)
        if index > len(session.messages):
            raise Conflict("The conversation no longer reaches that message; reload it.")
        source = version_rules.chosen_slot(at, version)
        chosen = version_store.load(session.path, source)  # read before anything is written
        _before, _at, inner = version_rules.split_at(groups, index)
        kept = version_store.keep(
            session.path,
            sid,
            index,
            session.messages[index:],
            session_ops.context_tail(session, index),
            inner,
        )
        session.message_versions = version_rules.switch_to(
            groups, index, version, kept, chosen["message_versions"]
        )
        session_ops.show_tail(session, index, chosen["messages"], chosen["context_tail"])
        path = session.path
    version_store.remove(path, {source})  # its rows are in the session file now
    return {"message_index": index, "version": version, "count": len(at["versions"])}

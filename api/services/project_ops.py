"""Sessions and projects together: moving a session into a project, deleting a project (its sessions move
out, never away), and the bulk actions of the sidebar's selection.

A bulk action changes each session on its own, through ``api.store.session_edit.edit`` or the catalogue's delete
and restore, so each session is saved whole or not at all; one session failing does not stop the others,
and the answer gives each id its outcome. The request is checked as a whole first: a malformed id list
changes nothing.
"""

from __future__ import annotations

import errno
import logging
from collections.abc import Callable
from typing import Any

from api.agent import turn_journal
from api.rules.errors import ApiError, BadRequest, Conflict, redact_paths
from api.rules.session_fields import is_safe_session_id
from api.services import session_catalogue
from api.store import models, projects
from api.store.session_edit import Unchanged, edit

log = logging.getLogger("talaria.projects")

MAX_BULK = 1000
ACTIONS = ("move", "archive", "unarchive", "delete", "restore")


def _target_project(project_id: Any, store: models.Store | None) -> str | None:
    """None (out of any project) or the id of a project that exists."""
    if project_id is None or project_id == "":
        return None
    return str(projects.get_project(project_id, store=store)["project_id"])


def _set_project(sid: str, project: str | None, store: models.Store | None) -> dict[str, Any]:
    with edit(sid, touch_updated_at=False, store=store) as session:
        previous = session.project_id
        if previous == project:
            raise Unchanged
        session.project_id = project
    return {"session": session.compact(), "previous_project_id": previous}


def move_session(sid: Any, project_id: Any, *, store: models.Store | None = None) -> dict[str, Any]:
    """``POST /api/session/move``: the session's ``project_id`` set (None: out of its project)."""
    if not isinstance(sid, str) or not is_safe_session_id(sid):
        raise BadRequest("Invalid session_id")
    return _set_project(sid, _target_project(project_id, store), store)


def delete_project(project_id: Any, *, store: models.Store | None = None) -> dict[str, Any]:
    """Move every session of the project out of it, then take the project off the list. A session that
    cannot be moved keeps the project on the list (409), so deleting again finishes the work."""
    pid = projects.get_project(project_id, store=store)["project_id"]
    outcomes = [
        _outcome(sid, lambda sid: _set_project(sid, None, store))
        for sid in models.store(store).in_project(pid)
    ]
    failed = [outcome for outcome in outcomes if not outcome["ok"]]
    if failed:
        raise Conflict(f"{len(failed)} sessions could not be moved out; the project is kept", results=failed)
    removed = projects.remove_project(pid, store=store)
    return {"ok": True, "project": removed, "moved": [outcome["session_id"] for outcome in outcomes]}


def _outcome(key: str, change: Callable[[str], dict[str, Any]], field: str = "session_id") -> dict[str, Any]:
    """One session's change as a per-id outcome (``field`` names the key); its failure is reported, not
    raised."""
    try:
        result = change(key)
    except ApiError as exc:
        return {field: key, "ok": False, "status": exc.status, "error": exc.message}
    except OSError as exc:
        log.error("bulk change of %s failed: %s", key, exc)
        full = exc.errno in (errno.ENOSPC, errno.EDQUOT)
        return {
            field: key,
            "ok": False,
            "status": 507 if full else 500,
            "error": redact_paths(f"Could not save: {exc.strerror or exc}"),
        }
    return {field: key, "ok": True, **result}


def _strings(value: Any, field: str) -> list[str]:
    if not isinstance(value, list) or not value:
        raise BadRequest(f"{field} must be a non-empty list")
    if len(value) > MAX_BULK:
        raise BadRequest(f"{field} holds more than {MAX_BULK} items")
    if not all(isinstance(item, str) for item in value):
        raise BadRequest(f"{field} must hold strings")
    return list(dict.fromkeys(value))  # each once, in the order given


def _session_ids(value: Any) -> list[str]:
    ids = _strings(value, "session_ids")
    if not all(is_safe_session_id(sid) for sid in ids):
        raise BadRequest("session_ids holds an invalid session id")
    return ids


def _change_for(
    action: str, body: dict[str, Any], store: models.Store | None, turns: turn_journal.LiveTurns | None
) -> tuple[list[str], Callable[[str], dict[str, Any]]]:
    if action == "restore":
        tokens = _strings(body.get("undo_tokens"), "undo_tokens")
        return tokens, lambda token: {"session": session_catalogue.restore_deleted(token, store=store)}
    ids = _session_ids(body.get("session_ids"))
    if action == "move":
        project = _target_project(body.get("project_id"), store)
        return ids, lambda sid: _set_project(sid, project, store)
    if action in ("archive", "unarchive"):
        flag = action == "archive"
        return ids, lambda sid: {"session": session_catalogue.set_flag(sid, "archived", flag, store=store)}
    return ids, lambda sid: session_catalogue.delete_session(sid, store=store, turns=turns)


def bulk(
    body: dict[str, Any], *, store: models.Store | None = None, turns: turn_journal.LiveTurns | None = None
) -> dict[str, Any]:
    """``POST /api/sessions/bulk``: ``{action, session_ids, project_id?}`` (``restore``: ``undo_tokens``,
    the undo of a bulk delete). Each id's outcome in ``results``, in the order given."""
    action = body.get("action")
    if action not in ACTIONS:
        raise BadRequest("action must be one of " + ", ".join(ACTIONS))
    keys, change = _change_for(action, body, store, turns)
    field = "undo_token" if action == "restore" else "session_id"
    results = [_outcome(key, change, field) for key in keys]
    done = sum(1 for result in results if result["ok"])
    return {"ok": done == len(results), "action": action, "done": done, "failed": len(results) - done,
            "results": results}  # fmt: skip

"""Session administration (HTTP-free): list, get with paging, create, rename, pin, archive, delete and
its undo, search, and the read-only agent sessions from ``state.db``. Export and import live in
``api.session_export``.

Mutations hold ``api.config._get_session_agent_lock(sid)`` (looked up at call time) around the
in-memory change and the save. Errors are ``api.errors`` classes.
"""

from __future__ import annotations

import logging
import os
import re
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from api import atomic, models, session_feed, session_index, session_list, state_db, tombstones
from api import config as _config
from api import workspace as _workspace
from api.anchor import anchor_message_index
from api.errors import ApiError, BadRequest, Conflict, NotFound
from api.session_fields import is_safe_session_id, message_text, new_session_id

log = logging.getLogger("talaria.admin")

TITLE_MAX = 200
SEARCH_MAX_RESULTS = 50
SEARCH_QUERY_MAX = 500
DISPLAY_ROLES = frozenset({"user", "assistant"})
_UNDO_TOKEN = re.compile(r"([A-Za-z0-9-][A-Za-z0-9_-]{0,199})-(\d{10,16})")
# Extra keys of a "full session" beyond the sidebar row (docs/http-api.md).
_FULL_FIELDS = ("tool_calls", "context_length", "last_prompt_tokens", "compression_generation")


# ---------------------------------------------------------------------- helpers


def _session_dir() -> Path:
    return Path(models.SESSION_DIR)


def _index_file() -> Path:
    return Path(models.SESSION_INDEX_FILE)


def trash_dir() -> Path:
    """``<state_dir>/trash`` (the session folder's parent, so tests that patch ``models.SESSION_DIR`` follow)."""
    return _session_dir().parent / "trash"


def _lock(sid: str):
    return _config._get_session_agent_lock(sid)


def load_session(sid: str) -> models.Session:
    """The session, or NotFound; an unreadable file is a clear 500 that points at the recovery audit."""
    if not is_safe_session_id(sid):
        raise NotFound("Session not found")
    try:
        return models.get_session(sid)
    except KeyError:
        raise NotFound("Session not found") from None
    except ValueError as exc:  # a link, FIFO or device where a session file should be
        log.warning("session %s is not readable as a session: %s", sid, exc)
        raise NotFound("Session not found") from None
    except Exception as exc:  # noqa: BLE001 - a hostile or damaged file: parse errors, wrong types, depth
        log.warning("session %s could not be loaded: %s: %s", sid, type(exc).__name__, exc)
        raise ApiError("Session file could not be read; run the recovery audit", status=500) from None


def clean_title(value: Any, field: str = "title") -> str:
    if not isinstance(value, str):
        raise BadRequest(f"{field} must be a string")
    title = " ".join(value.split())
    if not title:
        raise BadRequest(f"{field} must not be empty")
    if len(title) > TITLE_MAX:
        raise BadRequest(f"{field} is too long (at most {TITLE_MAX} characters)")
    return title


# ---------------------------------------------------------------------- reading


def _is_display_role(role: Any) -> bool:
    return isinstance(role, str) and role in DISPLAY_ROLES


def display_message(msg: dict, idx: int) -> dict:
    """A stored message plus ``_idx`` and, for user/assistant text, the sanitized ``html``."""
    out = dict(msg)
    out["_idx"] = idx
    if _is_display_role(msg.get("role")):
        try:
            from api.render import render_message

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


def _paged_messages(messages: list, msg_limit: int | None, msg_before: int | None) -> dict:
    start, end = page_bounds(len(messages), msg_limit, msg_before)
    page = [display_message(m, i) for i, m in enumerate(messages[start:end], start) if isinstance(m, dict)]
    return {"messages": page, "has_more_before": start > 0, "total_messages": len(messages)}


def full_session(
    session: models.Session, msg_limit: int | None = None, msg_before: int | None = None
) -> dict:
    """The sidebar row plus a page of messages and the context fields the page shows."""
    with _lock(session.session_id):  # a consistent snapshot; rendering happens outside the lock
        row = session.compact()
        messages = list(session.messages)
        for name in _FULL_FIELDS:
            value = getattr(session, name, None)
            row[name] = list(value) if isinstance(value, list) else value
        row["can_uncompress"] = isinstance(getattr(session, "compression_undo", None), dict)
        details = session.compression_anchor_details
        row["compression_anchor_idx"] = anchor_message_index(
            messages,
            session.compression_anchor_message_key,
            session.compression_anchor_visible_idx,
            details.get("message_idx") if isinstance(details, dict) else None,
        )
    row.update(_paged_messages(messages, msg_limit, msg_before))
    return row


def full_session_by_id(sid: str, msg_limit: int | None = None) -> dict:
    return full_session(load_session(sid), msg_limit)


def get_session_payload(sid: str, msg_limit: int | None = None, msg_before: int | None = None) -> dict:
    """``{"session": full}`` for a Talaria session, or a read-only agent session from ``state.db``."""
    try:
        session = load_session(sid)
    except NotFound:
        agent = agent_session(sid)
        if agent is None:
            raise
        messages = agent.pop("messages")
        agent.update(_paged_messages(messages, msg_limit, msg_before))
        return {"session": agent}
    return {"session": full_session(session, msg_limit, msg_before)}


# ---------------------------------------------------------------------- agent sessions (state.db, read-only)


def _agent_row(raw: Any) -> dict | None:
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


def _raw_agent_sessions() -> list:
    try:
        rows = state_db.list_agent_sessions()
    except Exception as exc:  # noqa: BLE001 - state.db is optional and read-only: unreadable = absent
        log.warning("listing agent sessions from state.db failed: %s", exc)
        return []
    return rows if isinstance(rows, list) else []


def agent_sessions(talaria_rows: Sequence[dict] = ()) -> list[dict]:
    """Sessions only the agent knows (CLI, other platforms), minus Talaria's own and deleted ones.

    Rows with source ``webui`` are left out too: they are web UI sessions (ours, ids the agent rotated
    during a compaction, or deleted ones), which the recovery audit reports when a sidecar is missing.
    """
    raw = _raw_agent_sessions()
    if not raw:
        return []
    exclude = {r["session_id"] for r in talaria_rows}
    deleted = tombstones.read_deleted_ids(_session_dir())
    out = []
    for item in raw:
        row = _agent_row(item)
        if row is None or row["source"] == "webui" or row["id"] in exclude or row["id"] in deleted:
            continue
        out.append(row)
    return out


def agent_session(sid: str) -> dict | None:
    """A read-only agent session with its messages, or None (no state.db, no such session, deleted here)."""
    if sid in tombstones.read_deleted_ids(_session_dir()):
        return None
    try:
        messages = state_db.get_state_db_session_messages(sid)
    except Exception as exc:  # noqa: BLE001
        log.warning("reading agent session %s from state.db failed: %s", sid, exc)
        return None
    if not isinstance(messages, list) or not messages:
        return None
    meta = next(
        (r for r in map(_agent_row, _raw_agent_sessions()) if r and r["id"] == sid), None
    ) or _agent_row({"id": sid})
    if meta is None:  # not a session id
        return None
    return {
        "session_id": sid,
        "title": meta["title"],
        "model": meta["model"],
        "source": meta["source"],
        "created_at": meta["started_at"],
        "read_only": True,
        "message_count": len(messages),
        "can_uncompress": False,
        "messages": messages,
    }


def list_sessions() -> dict:
    rows = models.all_sessions()
    return {"sessions": rows, "agent_sessions": agent_sessions(rows)}


# The agent writes state.db all through a turn, so its stat-keyed cache misses on nearly every request
# while turns stream; the first page reuses the agent's rows for a moment instead of a query each time.
AGENT_ROWS_MAX_AGE_S = 2.0
_AGENT_ROWS: dict[str, Any] = {"at": -AGENT_ROWS_MAX_AGE_S, "rows": []}
_AGENT_ROWS_LOCK = threading.Lock()


def _recent_agent_sessions() -> list[dict]:
    with _AGENT_ROWS_LOCK:
        if time.monotonic() - _AGENT_ROWS["at"] >= AGENT_ROWS_MAX_AGE_S:
            _AGENT_ROWS["rows"] = agent_sessions(models.all_sessions())
            _AGENT_ROWS["at"] = time.monotonic()
        return _AGENT_ROWS["rows"]


def sessions_page_json(limit: int | None = None, cursor: str | None = None) -> list[bytes]:
    """A page of sidebar rows (``api.session_list``) with ``feed_seq`` and, on the first page, the
    agent's own sessions; as chunks to send in order."""
    # Read before the rows: a change after this number reaches the tab through the feed.
    extra: dict[str, Any] = {"feed_seq": session_feed.CHANGES.seq}
    if cursor is None:
        extra["agent_sessions"] = _recent_agent_sessions()
    return session_list.page_json(limit, cursor, extra)


# ---------------------------------------------------------------------- create and edit


def create_session(model: Any = None, workspace: Any = None, title: Any = None) -> dict:
    """A new, empty session, saved at once."""
    if model is not None and (not isinstance(model, str) or len(model) > TITLE_MAX):
        raise BadRequest("model must be a string of at most 200 characters")
    folder = _workspace.default() if workspace is None else _workspace.choose(workspace)
    kwargs: dict[str, Any] = {"session_id": new_session_id(), "model": model or None, "workspace": folder}
    if title is not None:
        kwargs["title"] = clean_title(title)
        kwargs["manual_title"] = True
    session = models.Session(**kwargs)
    with _lock(session.session_id):
        session.save()
        models.cache_session(session)
    return full_session(session)


def set_workspace(sid: str, value: Any) -> dict:
    """Point a session's turns at another folder (``api.workspace.choose`` decides which are allowed)."""
    folder = _workspace.choose(value)

    def change(session: models.Session) -> None:
        if session.read_only:
            raise Conflict("This session is read-only.")
        session.workspace = folder

    return edit_session(sid, change)


def edit_session(sid: str, change) -> dict:
    """Apply ``change(session)`` under the session lock and save; the sidebar row after it."""
    with _lock(sid):
        session = load_session(sid)
        change(session)
        # Metadata edits keep updated_at, so renaming or pinning does not reorder the sidebar.
        session.save(touch_updated_at=False)
        return session.compact()


def rename_session(sid: str, title: Any) -> dict:
    title = clean_title(title)

    def change(session: models.Session) -> None:
        session.title = title
        session.manual_title = True

    return edit_session(sid, change)


def set_flag(sid: str, name: str, value: Any) -> dict:
    """Set ``pinned`` or ``archived``."""
    if name not in ("pinned", "archived"):
        raise BadRequest(f"unknown flag {name}")
    if not isinstance(value, bool):
        raise BadRequest(f"{name} must be true or false")
    return edit_session(sid, lambda session: setattr(session, name, value))


# ---------------------------------------------------------------------- delete and undo


def _move_durable(src: Path, dst: Path) -> None:
    """Rename ``src`` to ``dst`` (both folders are synced by the caller); copy+unlink across devices."""
    try:
        os.replace(src, dst)
    except OSError as exc:
        if exc.errno != 18:  # EXDEV
            raise
        atomic.copy_durable(src, dst)
        atomic.unlink_durable(src)


def _new_trash_folder(sid: str) -> Path:
    trash = trash_dir()
    if not trash.is_dir():
        trash.mkdir(parents=True, exist_ok=True)
        atomic.fsync_dir(trash.parent)
    stamp = atomic.unix_ms()
    while (trash / f"{sid}-{stamp}").exists():
        stamp += 1
    folder = trash / f"{sid}-{stamp}"
    folder.mkdir()
    atomic.fsync_dir(trash)
    return folder


def delete_session(sid: str) -> dict:
    """Move ``<sid>.json``, its ``.bak`` and set-aside backups to ``<state>/trash/<sid>-<ms>/``; tombstone the id.

    The tombstone is written first: after a crash at any point the session is either still live, or
    gone and unable to come back from an orphaned backup or from ``state.db``.
    """
    if not is_safe_session_id(sid):
        raise NotFound("Session not found")
    folder = _session_dir()
    live, bak = folder / f"{sid}.json", folder / f"{sid}.json.bak"
    with _lock(sid):
        if not live.exists() and not bak.exists():
            raise NotFound("Session not found")
        with models.LOCK:
            cached = models.SESSIONS.get(sid)
        if cached is not None and cached.active_stream_id:
            raise Conflict("Session is still streaming; stop the turn before deleting it.")
        tombstones.add_deleted(folder, sid)
        dest = _new_trash_folder(sid)
        for path in (live, bak, *folder.glob(f"{sid}.json.bak.precompress-*")):
            if path.exists():
                _move_durable(path, dest / path.name)
        atomic.fsync_dir(dest)
        atomic.fsync_dir(folder)
        session_index.note_removed(folder, _index_file(), sid)
        with models.LOCK:
            models.SESSIONS.pop(sid, None)
    return {"ok": True, "undo_token": dest.name}


def restore_deleted(token: Any) -> dict:
    """Undo a delete: move the files back from the trash and lift the tombstone."""
    match = _UNDO_TOKEN.fullmatch(token) if isinstance(token, str) else None
    if match is None:
        raise BadRequest("Invalid undo_token")
    sid = match.group(1)
    src = trash_dir() / token
    folder = _session_dir()
    with _lock(sid):
        if not (src / f"{sid}.json").is_file():
            raise NotFound("Nothing to restore: the undo token is unknown or was used already")
        if (folder / f"{sid}.json").exists():
            raise Conflict("A session with this id exists again; nothing was restored")
        folder.mkdir(parents=True, exist_ok=True)
        for kept in [src / f"{sid}.json.bak", *src.glob(f"{sid}.json.bak.precompress-*")]:
            if kept.is_file() and not (folder / kept.name).exists():
                _move_durable(kept, folder / kept.name)
        _move_durable(src / f"{sid}.json", folder / f"{sid}.json")
        atomic.fsync_dir(folder)
        atomic.fsync_dir(src)
        tombstones.remove_deleted(folder, sid)
        try:
            src.rmdir()
            atomic.fsync_dir(src.parent)
        except OSError:
            pass  # something else lives there; the folder stays
        session = load_session(sid)
        st = os.stat(session.path)
        row = session.compact()
        session_index.note_saved(folder, _index_file(), row, (st.st_size, st.st_mtime_ns))
    return row


# ---------------------------------------------------------------------- search

# Lowercase forms of U+212A KELVIN SIGN and U+0130 (their .lower() is ASCII-ish), raw or escaped.
_ASCII_LOWERING = (b"\xe2\x84\xaa", b"\xc4\xb0", b"\\u212a", b"\\u0130")


def _raw_may_contain(raw: bytes, needle: str) -> bool:
    """A cheap, exact pre-check on a file's bytes: False only when no message can contain ``needle``."""
    if not needle.isascii() or any(c in needle for c in '"\\') or any(ord(c) < 32 for c in needle):
        return True  # JSON may escape it: only the parsed text can tell
    lowered = raw.lower()
    return needle.encode() in lowered or any(token in lowered for token in _ASCII_LOWERING)


def snippet(text: str, pos: int, length: int, before: int = 60, after: int = 100) -> str:
    start, end = max(0, pos - before), min(len(text), pos + length + after)
    body = " ".join(text[start:end].split())
    return ("…" if start else "") + body + ("…" if end < len(text) else "")


def find_in_messages(messages: list, needle: str) -> dict | None:
    """``{"message_idx", "snippet"}`` of the first user/assistant message containing ``needle`` (lowercase)."""
    for idx, msg in enumerate(messages):
        if not isinstance(msg, dict) or not _is_display_role(msg.get("role")):
            continue
        text = message_text(msg)
        lowered = text.lower()
        pos = lowered.find(needle)
        if pos >= 0:
            source = text if len(lowered) == len(text) else lowered
            return {"message_idx": idx, "snippet": snippet(source, pos, len(needle))}
    return None


def _content_match(sid: str, needle: str) -> dict | None:
    with models.LOCK:
        cached = models.SESSIONS.get(sid)
    if cached is not None and not cached._loaded_metadata_only:
        return find_in_messages(list(cached.messages), needle)
    try:
        found = models.read_session_file(_session_dir() / f"{sid}.json")
    except (OSError, ValueError):
        return None
    if found is None:
        return None
    raw = found[1]
    if not _raw_may_contain(raw, needle):
        return None
    try:
        data = models.loads_json(raw)
    except Exception:  # noqa: BLE001 - a damaged file is simply not a match
        return None
    messages = data.get("messages") if isinstance(data, dict) else None
    return find_in_messages(messages, needle) if isinstance(messages, list) else None


def search_sessions(query: Any, content: bool = False) -> dict:
    """Rows whose title contains ``query`` (case-insensitive), and with ``content`` those whose messages do.

    Newest first, at most ``SEARCH_MAX_RESULTS``; files are read one at a time, only when needed.
    """
    if not isinstance(query, str):
        raise BadRequest("q must be a string")
    needle = " ".join(query.split()).lower()[:SEARCH_QUERY_MAX]
    if not needle:
        return {"sessions": []}
    out: list[dict] = []
    for row in models.all_sessions():
        title = row.get("title")
        if isinstance(title, str) and needle in title.lower():
            out.append(row)
        elif content:
            match = _content_match(row["session_id"], needle)
            if match is not None:
                out.append({**row, "match": match})
        if len(out) >= SEARCH_MAX_RESULTS:
            break
    return {"sessions": out}


# ---------------------------------------------------------------------- recovery


def recovery_audit() -> dict:
    from api import session_recovery

    return session_recovery.audit_session_recovery(_session_dir(), _config.STATE_DB_PATH)


def recovery_repair_safe() -> dict:
    from api import session_recovery

    return session_recovery.repair_safe_session_recovery(_session_dir(), _config.STATE_DB_PATH)

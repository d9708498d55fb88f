"""The session catalogue (HTTP-free): the operations that change or find sessions — create, rename,
pin, archive, the workspace, delete and its undo, search. How a session looks on the page lives in
``api.services.session_views``; export and import in ``api.services.session_export``.

Changes go through ``api.store.session_edit`` (lock, load, save once); delete and its undo move files under
the same per-session lock. Errors are ``api.rules.errors`` classes.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from api.agent import agent_sessions, turn_journal
from api.rules import jsonio
from api.rules.errors import BadRequest, Conflict, NotFound
from api.rules.session_fields import is_safe_session_id, message_text, new_session_id
from api.services import environment_check
from api.services import workspace as _workspace
from api.services.render import plain_text
from api.services.session_views import full_session, is_display_role
from api.store import atomic, models, session_files, tombstones
from api.store.session_edit import create, edit, lock
from api.store.session_lookup import load_session, session_dir

TITLE_MAX = 200
SEARCH_MAX_RESULTS = 50
SEARCH_QUERY_MAX = 500
_UNDO_TOKEN = re.compile(r"([A-Za-z0-9-][A-Za-z0-9_-]{0,199})-(\d{10,16})")


def trash_dir(*, store: models.Store | None = None) -> Path:
    """``<state_dir>/trash``: the session folder's parent."""
    return session_dir(store=store).parent / "trash"


def clean_title(value: Any, field: str = "title") -> str:
    if not isinstance(value, str):
        raise BadRequest(f"{field} must be a string")
    title = " ".join(value.split())
    if not title:
        raise BadRequest(f"{field} must not be empty")
    if len(title) > TITLE_MAX:
        raise BadRequest(f"{field} is too long (at most {TITLE_MAX} characters)")
    return title


# ---------------------------------------------------------------------- create and edit


def create_session(
    model: Any = None, workspace: Any = None, title: Any = None, *, store: models.Store | None = None
) -> dict[str, Any]:
    """A new, empty session, saved at once; the full session as the page shows it."""
    if model is not None and (not isinstance(model, str) or len(model) > TITLE_MAX):
        raise BadRequest("model must be a string of at most 200 characters")
    folder = _workspace.default() if workspace is None else _workspace.choose(workspace)
    kwargs: dict[str, Any] = {"session_id": new_session_id(), "model": model or None, "workspace": folder}
    if title is not None:
        kwargs["title"] = clean_title(title)
        kwargs["manual_title"] = True
    return save_new(models.Session(**kwargs), store=store)


def save_new(session: models.Session, *, store: models.Store | None = None) -> dict[str, Any]:
    """Save a session made here (a new id) and cache it; the full session as the page shows it."""
    create(session, store=store)
    return full_session(session)


def set_workspace(sid: str, value: Any, *, store: models.Store | None = None) -> dict[str, Any]:
    """Point a session's turns at another folder (``api.services.workspace.choose`` decides which are allowed); a
    session in another execution environment names a folder on that side, checked there."""
    try:
        remote = getattr(load_session(sid, store=store), "environment", None)
    except NotFound:  # the folder is judged first; the edit below says the session is unknown
        remote = None
    if remote:
        folder = environment_check.remote_folder(remote, value)
    else:
        folder = _workspace.choose(value)

    with edit(sid, touch_updated_at=False, store=store) as session:
        if session.read_only:
            raise Conflict("This session is read-only.")
        if session.environment != remote:
            raise Conflict("The session's environment changed meanwhile; choose the folder again.")
        if remote:
            session.environment_workspace = folder
        else:
            session.workspace = folder
    row = session.compact()
    if remote:  # the sidebar row does not carry it; the header shows it
        row["environment_workspace"] = session.environment_workspace
    return row


def rename_session(sid: str, title: Any, *, store: models.Store | None = None) -> dict[str, Any]:
    title = clean_title(title)

    # Metadata edits keep updated_at, so renaming or pinning does not reorder the sidebar.
    with edit(sid, touch_updated_at=False, store=store) as session:
        session.title = title
        session.manual_title = True
    return session.compact()


def set_flag(sid: str, name: str, value: Any, *, store: models.Store | None = None) -> dict[str, Any]:
    """Set ``pinned`` or ``archived``."""
    if name not in ("pinned", "archived"):
        raise BadRequest(f"unknown flag {name}")
    if not isinstance(value, bool):
        raise BadRequest(f"{name} must be true or false")
    with edit(sid, touch_updated_at=False, store=store) as session:
        setattr(session, name, value)
    return session.compact()


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


def _new_trash_folder(sid: str, store: models.Store | None) -> Path:
    trash = trash_dir(store=store)
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


def delete_session(
    sid: str, *, store: models.Store | None = None, turns: turn_journal.LiveTurns | None = None
) -> dict[str, Any]:
    """Move ``<sid>.json``, its ``.bak``, set-aside backups and compression undo to ``<state>/trash/<sid>-<ms>/``;
    tombstone the id.

    The tombstone is written first: after a crash at any point the session is either still live, or
    gone and unable to come back from an orphaned backup or from ``state.db``.
    """
    if not is_safe_session_id(sid):
        raise NotFound("Session not found")
    folder = session_dir(store=store)
    live, bak = folder / f"{sid}.json", folder / f"{sid}.json.bak"
    with lock(sid, store=store):
        if not live.exists() and not bak.exists():
            raise NotFound("Session not found")
        if (
            turn_journal.live_turn_for(sid, turns=turns) is not None
        ):  # a turn left pending on disk does not count
            raise Conflict("Session is still streaming; stop the turn before deleting it.")
        tombstones.add_deleted(folder, sid, models.store(store).tombstones)
        dest = _new_trash_folder(sid, store)
        for path in (
            live,
            bak,
            *folder.glob(f"{sid}.json.bak.precompress-*"),
            *folder.glob(f"{sid}.json.undo-*"),
            *folder.glob(f"{sid}.json.version-*"),
        ):
            if path.exists():
                _move_durable(path, dest / path.name)
        atomic.fsync_dir(dest)
        atomic.fsync_dir(folder)
        home = models.store(store)
        home.index.note_removed(folder, home.index_file, sid)
        home.drop(sid)
    return {"ok": True, "undo_token": dest.name}


def restore_deleted(token: Any, *, store: models.Store | None = None) -> dict[str, Any]:
    """Undo a delete: move the files back from the trash and lift the tombstone."""
    match = _UNDO_TOKEN.fullmatch(token) if isinstance(token, str) else None
    if match is None:
        raise BadRequest("Invalid undo_token")
    sid = match.group(1)
    src = trash_dir(store=store) / token
    folder = session_dir(store=store)
    with lock(sid, store=store):
        if not (src / f"{sid}.json").is_file():
            raise NotFound("Nothing to restore: the undo token is unknown or was used already")
        if (folder / f"{sid}.json").exists():
            raise Conflict("A session with this id exists again; nothing was restored")
        folder.mkdir(parents=True, exist_ok=True)
        for kept in [
            src / f"{sid}.json.bak",
            *src.glob(f"{sid}.json.bak.precompress-*"),
            *src.glob(f"{sid}.json.undo-*"),
            *src.glob(f"{sid}.json.version-*"),
        ]:
            if kept.is_file() and not (folder / kept.name).exists():
                _move_durable(kept, folder / kept.name)
        _move_durable(src / f"{sid}.json", folder / f"{sid}.json")
        atomic.fsync_dir(folder)
        atomic.fsync_dir(src)
        tombstones.remove_deleted(folder, sid, models.store(store).tombstones)
        try:
            src.rmdir()
            atomic.fsync_dir(src.parent)
        except OSError:
            pass  # something else lives there; the folder stays
        session = load_session(sid, store=store)
        st = os.stat(session.path)
        row = session.compact()
        home = models.store(store)
        home.index.note_saved(folder, home.index_file, row, (st.st_size, st.st_mtime_ns))
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


def _snippet_around(text: str, needle: str) -> str | None:
    lowered = text.lower()
    pos = lowered.find(needle)
    if pos < 0:
        return None
    return snippet(text if len(lowered) == len(text) else lowered, pos, len(needle))


def find_in_messages(messages: list[Any], needle: str) -> dict[str, Any] | None:
    """``{"message_idx", "snippet"}`` of the first user/assistant message containing ``needle`` (lowercase).

    The snippet is plain text, as the message reads once rendered (no Markdown marks); a needle that only
    the Markdown source holds (it spans the marks) gets a snippet of the source."""
    for idx, msg in enumerate(messages):
        if not isinstance(msg, dict) or not is_display_role(msg.get("role")):
            continue
        text = message_text(msg)
        if needle not in text.lower():
            continue
        found = _snippet_around(plain_text(text), needle) or _snippet_around(text, needle)
        return {"message_idx": idx, "snippet": found}
    return None


def _content_match(sid: str, needle: str, store: models.Store | None) -> dict[str, Any] | None:
    cached = models.store(store).cached(sid)
    if cached is not None and not cached.metadata_only:
        return find_in_messages(list(cached.messages), needle)
    try:
        found = session_files.read_session_file(session_dir(store=store) / f"{sid}.json")
    except (OSError, ValueError):
        return None
    if found is None:
        return None
    raw = found[1]
    if not _raw_may_contain(raw, needle):
        return None
    try:
        data = jsonio.loads(raw)
    except Exception:  # noqa: BLE001 - a damaged file is simply not a match
        return None
    messages = data.get("messages") if isinstance(data, dict) else None
    return find_in_messages(messages, needle) if isinstance(messages, list) else None


def search_sessions(
    query: Any, content: bool = False, *, store: models.Store | None = None
) -> dict[str, Any]:
    """Rows whose title contains ``query`` (case-insensitive), and with ``content`` those whose messages do.

    Newest first, at most ``SEARCH_MAX_RESULTS``; files are read one at a time, only when needed.
    """
    if not isinstance(query, str):
        raise BadRequest("q must be a string")
    needle = " ".join(query.split()).lower()[:SEARCH_QUERY_MAX]
    if not needle:
        return {"sessions": []}
    out: list[dict[str, Any]] = []
    for row in models.store(store).newest_first():
        title = row.get("title")
        if isinstance(title, str) and needle in title.lower():
            out.append(row)
        elif content:
            match = _content_match(row["session_id"], needle, store)
            if match is not None:
                out.append({**row, "match": match})
        if len(out) >= SEARCH_MAX_RESULTS:
            break
    if content and len(out) < SEARCH_MAX_RESULTS:
        out.extend(_agent_matches(needle, SEARCH_MAX_RESULTS - len(out), store))
    return {"sessions": out}


def _agent_matches(needle: str, limit: int, store: models.Store | None) -> list[dict[str, Any]]:
    """The agent's own conversations whose messages hold ``needle`` (found through its full-text index),
    as read-only match rows."""
    out = []
    for found in agent_sessions.sessions_matching(needle, limit, store=store):
        match = find_in_messages(found.pop("messages"), needle)
        if match is not None:
            out.append({**found, "session_id": found["id"], "match": match})
    return out

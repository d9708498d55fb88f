"""Durable tombstones in the session folder: deleted sessions, and pruned zero-message orphans.

``_deleted_webui_sessions.json`` keeps a deleted session from coming back (from its ``.bak`` or from
``state.db``); ``_pruned_webui_orphans.json`` does the same for pruned empty orphans. Both are
``{"version": 1, "ids": [...]}`` with the newest id last, capped by recency. A corrupt file reads as
empty (with a warning) and is kept beside itself before it is next overwritten.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from pathlib import Path
from typing import Any

from api.rules.errors import BadRequest
from api.rules.session_fields import is_safe_session_id
from api.store import atomic
from api.store.in_use import InUse
from api.store.safe_read import read_regular_file

log = logging.getLogger("talaria.tombstones")

DELETED_FILE = "_deleted_webui_sessions.json"
DELETED_CAP = 1000
PRUNED_FILE = "_pruned_webui_orphans.json"
PRUNED_CAP = 500


class Tombstones:
    """What a store keeps in memory about its tombstone files: one lock for their read-change-write, and each
    file's ids by its stat signature. The store owns one (``Store.tombstones``), put in use with the store."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        # path -> (stat signature, ids oldest..newest, corrupt?); saves call remove_deleted on every write,
        # so an unchanged file costs one stat.
        self.cache: dict[Path, tuple[tuple[Any, ...], tuple[str, ...], bool]] = {}


TOMBSTONES: InUse[Tombstones] = InUse(Tombstones)  # the store in use's (``session_store.use``)


def _parse(data: bytes) -> list[str] | None:
    """Ids oldest..newest (each once, at its newest position), or None when the bytes are not a tombstone."""
    if not data.strip():
        return []
    try:
        doc = json.loads(data.decode("utf-8"))
    except (ValueError, UnicodeDecodeError):
        return None
    ids = doc.get("ids") if isinstance(doc, dict) else doc  # a bare list is accepted too
    if not isinstance(ids, list):
        return None
    seen: set[str] = set()
    newest_first: list[str] = []
    for sid in reversed(ids):
        if is_safe_session_id(sid) and sid not in seen:
            seen.add(sid)
            newest_first.append(sid)
    newest_first.reverse()
    return newest_first


def _read(held: Tombstones, path: Path) -> tuple[tuple[str, ...], bool]:
    """(ids oldest..newest, corrupt?) of one tombstone file; a missing file is empty."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        held.cache.pop(path, None)
        return (), False
    sig = (st.st_ino, st.st_size, st.st_mtime_ns)
    cached = held.cache.get(path)
    if cached is not None and cached[0] == sig:
        return cached[1], cached[2]
    try:
        found = read_regular_file(path)
    except ValueError:  # a FIFO, link or folder: unreadable, like a corrupt file
        found = None
    ids = _parse(found[1]) if found is not None else None
    corrupt = ids is None
    if corrupt:
        log.warning("tombstone %s is not readable; treating it as empty (it is kept when next written)", path)
    result = tuple(ids or ())
    held.cache[path] = (sig, result, corrupt)
    return result, corrupt


def _write(held: Tombstones, path: Path, ids: list[str], cap: int, corrupt: bool) -> None:
    if corrupt:
        atomic.keep_aside(path, "corrupt")
    payload = {"version": 1, "ids": ids[-cap:]}
    atomic.write_bytes_durable(path, json.dumps(payload, indent=2).encode("utf-8"))
    held.cache.pop(path, None)


def _add(path: Path, sid: str, cap: int, held: Tombstones | None = None) -> None:
    if not is_safe_session_id(sid):
        raise BadRequest("invalid session id")
    held = TOMBSTONES.get(held)
    with held.lock:
        ids, corrupt = _read(held, path)
        if ids and ids[-1] == sid and not corrupt:
            return
        _write(held, path, [x for x in ids if x != sid] + [sid], cap, corrupt)


def _remove(path: Path, sid: str, cap: int, held: Tombstones | None = None) -> bool:
    if not is_safe_session_id(sid):
        return False
    held = TOMBSTONES.get(held)
    with held.lock:
        ids, corrupt = _read(held, path)
        if sid not in ids:
            return False
        _write(held, path, [x for x in ids if x != sid], cap, corrupt)
        return True


def deleted_path(session_dir: Path) -> Path:
    return Path(session_dir) / DELETED_FILE


def pruned_path(session_dir: Path) -> Path:
    return Path(session_dir) / PRUNED_FILE


def read_deleted_ids(session_dir: Path, held: Tombstones | None = None) -> set[str]:
    """Ids of sessions deleted through the web UI (empty when the file is missing or corrupt); ``held``: what
    memory keeps of the files, the folder's store's (the store in use's when None)."""
    held = TOMBSTONES.get(held)
    with held.lock:
        return set(_read(held, deleted_path(session_dir))[0])


def deleted_ids_newest_last(session_dir: Path) -> list[str]:
    held = TOMBSTONES.get()
    with held.lock:
        return list(_read(held, deleted_path(session_dir))[0])


def add_deleted(session_dir: Path, sid: str, held: Tombstones | None = None) -> None:
    """Record a deletion (moves an existing id to the newest end; the oldest fall off past the cap)."""
    _add(deleted_path(session_dir), sid, DELETED_CAP, held)


def remove_deleted(session_dir: Path, sid: str, held: Tombstones | None = None) -> bool:
    """Forget a deletion (the session is live again); True when the id was there."""
    return _remove(deleted_path(session_dir), sid, DELETED_CAP, held)


def read_pruned_ids(session_dir: Path) -> set[str]:
    held = TOMBSTONES.get()
    with held.lock:
        return set(_read(held, pruned_path(session_dir))[0])


def add_pruned(session_dir: Path, sid: str) -> None:
    _add(pruned_path(session_dir), sid, PRUNED_CAP)


def remove_pruned(session_dir: Path, sid: str) -> bool:
    return _remove(pruned_path(session_dir), sid, PRUNED_CAP)


def forget_session(session_dir: Path, sid: str) -> None:
    """Clear ``sid`` from both tombstones (a save with messages makes the session live again)."""
    remove_deleted(session_dir, sid)
    remove_pruned(session_dir, sid)

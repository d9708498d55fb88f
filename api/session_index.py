"""``_index.json``: the sidebar index, a cache that can always be rebuilt from the session files.

The index lives in memory per session folder, its rows kept in sidebar order (``api.sidebar_order``). A save
moves one row (O(log n)) and schedules a flush, so ``_index.json`` is current within ``index_flush_delay``
seconds (or ten times the last flush's duration, when that is longer) and at shutdown. Each row in the file carries ``_stat`` = [size, mtime_ns, ROW_FORMAT] of its file, so
loading validates the index with one ``stat`` per file and re-reads only the files that changed behind it.
In memory the stamps are kept beside the rows, which are handed out as they are: readers never change them.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, cast

from api import atomic, jsonio
from api import config as _config
from api.safe_read import read_regular_file
from api.session_fields import is_safe_session_id
from api.sidebar_order import Key, Page, SidebarOrder

log = logging.getLogger("talaria.index")

_STALE_TMP_AGE_S = 3600.0
# Bumped when a row's figures are computed differently: rows built by an older version are rebuilt once.
ROW_FORMAT = 2
_SYNC_REBUILD_FILES = 16  # a first build that had to read more files than this is written at once
# While rows keep changing, a flush waits at least this many times as long as the last one took: writing the
# whole file for each turn's checkpoint would keep the disk and the interpreter busy with many sessions, and a
# row the file lacks after a crash is read again from its session file (its stamp differs).
_FLUSH_SPACING = 10


class _IndexState:
    def __init__(self, session_dir: Path, index_file: Path):
        self.session_dir = session_dir
        self.index_file = index_file
        self.order = SidebarOrder()
        self.stamps: dict[str, list[int]] = {}
        self.encoded: dict[
            str, tuple[dict[str, Any], bytes]
        ] = {}  # each row's JSON in the file, while it is current
        self.version = 0  # counts changes to the rows
        self.listing: tuple[int, list[dict[str, Any]]] | None = (
            None  # ``all_rows``'s copies and the version they show
        )
        self.timer: threading.Timer | None = None
        self.dirty = False
        self.flush_lock = threading.Lock()
        self.flush_seconds = 0.0  # how long the last flush took


_STATES: dict[Path, _IndexState] = {}
_LOCK = threading.RLock()


def _scan_session_files(session_dir: Path) -> dict[str, os.stat_result]:
    out: dict[str, os.stat_result] = {}
    try:
        entries = os.scandir(session_dir)
    except FileNotFoundError:
        return out
    now = time.time()
    with entries:
        for entry in entries:
            name = entry.name
            if name.endswith(".json") and not name.startswith("_"):
                sid = name[:-5]
                if is_safe_session_id(sid) and entry.is_file(follow_symlinks=False):
                    out[sid] = entry.stat(follow_symlinks=False)
            elif ".tmp." in name and not name.startswith("_index"):
                _sweep_stale_tmp(entry, now)
    return out


def _sweep_stale_tmp(entry: os.DirEntry[str], now: float) -> None:
    try:
        if now - entry.stat(follow_symlinks=False).st_mtime > _STALE_TMP_AGE_S:
            os.unlink(entry.path)
    except OSError:
        pass


def _stamp(size: int, mtime_ns: int) -> list[int]:
    return [size, mtime_ns, ROW_FORMAT]


# How a session file is read: ``api.models`` owns the file format and registers its two readers at import.
_read_stub: Callable[[Path], Any] | None = None  # the metadata prefix only, or None
_read_session: Callable[[Path], Any] | None = None  # the whole file, or None


def use_session_readers(read_stub: Callable[[Path], Any], read_session: Callable[[Path], Any]) -> None:
    global _read_stub, _read_session
    _read_stub, _read_session = read_stub, read_session


def _row_from_file(path: Path) -> dict[str, Any] | None:
    if _read_stub is None or _read_session is None:
        raise RuntimeError("api.models registers the session readers when it is imported")
    stub = _read_stub(path)
    # A file Talaria did not write lacks the row's figures in its prefix: it is read in full, once.
    session = stub if stub is not None and stub.has_sidebar_figures() else _read_session(path)
    if session is None:
        return None
    return cast("dict[str, Any] | None", session.compact())


def _read_index_file(index_file: Path) -> list[Any]:
    try:
        found = read_regular_file(index_file)
        data = jsonio.loads(found[1]) if found is not None else []
    except (OSError, ValueError):
        return []
    return data if isinstance(data, list) else []


def _build_rows(
    session_dir: Path, index_file: Path, *, trust_index: bool
) -> tuple[dict[str, dict[str, Any]], dict[str, list[int]], bool, int]:
    """Rows and stamps for every session file: reuse index rows whose ``_stat`` still matches, re-read the
    rest."""
    existing = {}
    if trust_index:
        for row in _read_index_file(index_file):
            if isinstance(row, dict) and isinstance(row.get("session_id"), str):
                existing[row["session_id"]] = row
    files = _scan_session_files(session_dir)
    rows: dict[str, dict[str, Any]] = {}
    stamps: dict[str, list[int]] = {}
    changed = len(existing) != len(files)
    files_read = 0
    for sid, st in files.items():
        stamp = _stamp(st.st_size, st.st_mtime_ns)
        row = existing.get(sid)
        if row is not None and row.get("_stat") == stamp:
            del row["_stat"]
            rows[sid], stamps[sid] = row, stamp
            continue
        fresh = _row_from_file(session_dir / f"{sid}.json")
        changed = True
        files_read += 1
        if fresh is not None:
            rows[sid], stamps[sid] = fresh, stamp
    return rows, stamps, changed, files_read


def _state(session_dir: Path, index_file: Path) -> _IndexState:
    key = Path(index_file)
    with _LOCK:
        state = _STATES.get(key)
        if state is not None and state.session_dir == Path(session_dir):
            return state
        state = _IndexState(Path(session_dir), key)
        rows, state.stamps, changed, files_read = _build_rows(state.session_dir, key, trust_index=True)
        state.order = SidebarOrder(rows)
        _STATES[key] = state
        if files_read > _SYNC_REBUILD_FILES:
            state.dirty = True
            _flush_state(state)  # an expensive rebuild is kept at once
        elif changed or not key.exists():
            _schedule(state)
        return state


# Who hears of every row change (the sidebar feed): (changed(sid, row or None), reset()).
_LISTENERS: list[tuple[Callable[[str, dict[str, Any] | None], None], Callable[[], None]]] = []


def add_listener(changed: Callable[[str, dict[str, Any] | None], None], reset: Callable[[], None]) -> None:
    """``changed`` hears each saved row (None: removed); ``reset`` hears that the rows were rebuilt."""
    _LISTENERS.append((changed, reset))


def _tell(sid: str | None, row: dict[str, Any] | None) -> None:
    for changed, reset in _LISTENERS:
        try:
            changed(sid, row) if sid is not None else reset()
        except Exception:  # noqa: BLE001 - a listener never breaks a save
            log.exception("index listener failed")


def note_saved(session_dir: Path, index_file: Path, row: dict[str, Any], stat: tuple[int, int]) -> None:
    """Record a just-saved session's row; ``_index.json`` follows within ``index_flush_delay``."""
    state = _state(session_dir, index_file)
    row = dict(row)  # the index's own: the caller may go on changing its dict
    sid = row["session_id"]
    with _LOCK:
        state.order.put(sid, row)
        state.stamps[sid] = _stamp(stat[0], stat[1])
        state.version += 1
        _schedule(state)
    _tell(sid, row)


def note_removed(session_dir: Path, index_file: Path, sid: str) -> None:
    state = _state(session_dir, index_file)
    with _LOCK:
        removed = sid in state.order
        if removed:
            state.order.remove(sid)
            state.stamps.pop(sid, None)
            state.encoded.pop(sid, None)
            state.version += 1
            _schedule(state)
    if removed:
        _tell(sid, None)


def _schedule(state: _IndexState) -> None:
    state.dirty = True
    if state.timer is None:
        delay = max(float(_config.setting("index_flush_delay")), _FLUSH_SPACING * state.flush_seconds)
        state.timer = threading.Timer(delay, _flush_state, args=(state,))
        state.timer.daemon = True
        state.timer.start()


def all_rows(session_dir: Path, index_file: Path) -> list[dict[str, Any]]:
    """Copies of every row, newest first (pinned or not); made again after a change, in O(sessions), so
    never on a request's path."""
    state = _state(session_dir, index_file)
    with _LOCK:
        version, listing = state.version, state.listing
        if listing is not None and listing[0] == version:
            return list(listing[1])
        rows = state.order.newest_first()
    copies = [dict(row) for row in rows]
    with _LOCK:
        if state.version == version:
            state.listing = (version, copies)
    return list(copies)


def newest_first(session_dir: Path, index_file: Path) -> Iterator[dict[str, Any]]:
    """The rows newest first, pinned or not, read as the walk reaches them (for a walk that may stop early);
    the rows are the index's own: read them, never change them."""
    state = _state(session_dir, index_file)
    with _LOCK:
        return state.order.newest_first()


def page(
    session_dir: Path, index_file: Path, before: Key | None, limit: int | None, project: str | None = None
) -> Page:
    """A page of the sidebar order (``api.sidebar_order.SidebarOrder.page``), of one project's rows when
    ``project`` is given: O(page size + log n)."""
    state = _state(session_dir, index_file)
    with _LOCK:
        return state.order.page(before, limit, project)


def in_project(session_dir: Path, index_file: Path, project: str) -> list[str]:
    """The ids of a project's sessions, newest first: O(the project's size)."""
    state = _state(session_dir, index_file)
    with _LOCK:
        return state.order.in_project(project)


def count(session_dir: Path, index_file: Path) -> int:
    state = _state(session_dir, index_file)
    with _LOCK:
        return len(state.order)


def row(session_dir: Path, index_file: Path, sid: str) -> dict[str, Any] | None:
    """A copy of one session's row; None when the index has none."""
    state = _state(session_dir, index_file)
    with _LOCK:
        found = state.order.get(sid)
    return dict(found) if found is not None else None


def has_row(session_dir: Path, index_file: Path, sid: str) -> bool:
    state = _state(session_dir, index_file)
    with _LOCK:
        return sid in state.order


def _file_bytes(
    state: _IndexState,
    rows: Iterator[dict[str, Any]],
    stamps: dict[str, list[int]],
    encoded: dict[str, tuple[dict[str, Any], bytes]],
) -> bytes:
    """``_index.json``: every row with its ``_stat``, newest first. Each row's JSON is kept until the row
    changes, so a flush while turns stream encodes only the rows that changed."""
    parts, fresh = [], []
    for row in rows:
        sid = row["session_id"]
        hit = encoded.get(sid)
        if hit is None or hit[0] is not row:
            hit = (row, jsonio.dumps(dict(row, _stat=stamps.get(sid))))
            fresh.append(hit)
        parts.append(hit[1])
    with _LOCK:
        for row, data in fresh:
            if state.order.get(row["session_id"]) is row:
                state.encoded[row["session_id"]] = (row, data)
    return b"[" + b",".join(parts) + b"]"


def _flush_state(state: _IndexState) -> None:
    with state.flush_lock:
        with _LOCK:
            timer, state.timer = state.timer, None
            if timer is not None and timer is not threading.current_thread():
                timer.cancel()
            if not state.dirty:
                return
            state.dirty = False
            rows = state.order.newest_first()
            stamps, encoded = dict(state.stamps), dict(state.encoded)
        if not state.session_dir.is_dir():
            return  # the folder is gone (a test's tmp dir): nothing to keep current
        started = time.monotonic()
        try:
            atomic.write_bytes_durable(state.index_file, _file_bytes(state, rows, stamps, encoded))
            state.flush_seconds = time.monotonic() - started
        except (OSError, TypeError, ValueError) as exc:
            log.warning("could not write %s: %s", state.index_file, exc)
            with _LOCK:
                state.dirty = True


def flush(index_file: Path | None = None) -> None:
    """Write pending index changes now (all folders when ``index_file`` is None)."""
    with _LOCK:
        states = (
            list(_STATES.values())
            if index_file is None
            else [s for k, s in _STATES.items() if k == Path(index_file)]
        )
    for state in states:
        _flush_state(state)


def forget(session_dir: Path) -> None:
    """Drop the in-memory index of a folder (files changed behind it); the next read re-validates."""
    flush_states = []
    with _LOCK:
        for key, state in list(_STATES.items()):
            if state.session_dir == Path(session_dir):
                flush_states.append(state)
                del _STATES[key]
    for state in flush_states:
        _flush_state(state)
    if flush_states:
        _tell(None, None)


def rebuild_index_file(session_dir: Path, index_file: Path | None = None) -> int:
    """Rebuild ``_index.json`` from the session files alone; returns the row count."""
    session_dir = Path(session_dir)
    index_file = Path(index_file) if index_file else session_dir / "_index.json"
    forget(session_dir)
    rows, stamps, _, _ = _build_rows(session_dir, index_file, trust_index=False)
    state = _IndexState(session_dir, index_file)
    state.order, state.stamps = SidebarOrder(rows), stamps
    state.dirty = True
    with _LOCK:
        _STATES[index_file] = state
    _flush_state(state)
    _tell(None, None)
    return len(rows)


atexit.register(flush)

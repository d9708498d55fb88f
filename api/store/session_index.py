"""``_index.json``: the sidebar index, a cache that can always be rebuilt from the session files.

The index lives in memory per session folder (a ``SessionIndex``, one per store), its rows kept in sidebar order (``api.rules.sidebar_order``). A save
moves one row (O(log n)) and schedules a flush, so ``_index.json`` is current within ``index_flush_delay``
seconds (or ten times the last flush's duration, when that is longer) and at shutdown. Each row in the file carries ``_stat`` = [size, mtime_ns, ROW_FORMAT] of its file, so
loading validates the index with one ``stat`` per file and re-reads only the files that changed behind it.
In memory the stamps are kept beside the rows, which are handed out as they are: readers never change them.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, cast

from api.rules import jsonio
from api.rules.session_fields import is_safe_session_id
from api.rules.sidebar_order import Key, Page, SidebarOrder
from api.store import atomic
from api.store import config as _config
from api.store.safe_read import read_regular_file

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


def _read_index_file(index_file: Path) -> list[Any]:
    try:
        found = read_regular_file(index_file)
        data = jsonio.loads(found[1]) if found is not None else []
    except (OSError, ValueError):
        return []
    return data if isinstance(data, list) else []


def _as_path(value: Path | str) -> Path:
    """``value`` itself when it is a Path, so the hot path finds it by identity."""
    return value if isinstance(value, Path) else Path(value)


class SessionIndex:
    """The in-memory indexes of one store, one per session folder, and who hears of their changes.

    ``read_stub`` reads a file's metadata prefix (or None), ``read_session`` the whole file (or None): the
    session's file format is ``api.store.models``'s, which the store passes in.
    """

    def __init__(self, read_stub: Callable[[Path], Any], read_session: Callable[[Path], Any]) -> None:
        self._read_stub = read_stub
        self._read_session = read_session
        self._states: dict[Path, _IndexState] = {}
        self._lock = threading.RLock()
        # Who hears of every row change (the sidebar feed): (changed(sid, row or None), reset()).
        self._listeners: list[tuple[Callable[[str, dict[str, Any] | None], None], Callable[[], None]]] = []

    def _row_from_file(self, path: Path) -> dict[str, Any] | None:
        stub = self._read_stub(path)
        # A file Talaria did not write lacks the row's figures in its prefix: it is read in full, once.
        session = stub if stub is not None and stub.has_sidebar_figures() else self._read_session(path)
        if session is None:
            return None
        return cast("dict[str, Any] | None", session.compact())

    def _build_rows(
        self, session_dir: Path, index_file: Path, *, trust_index: bool
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
            fresh = self._row_from_file(session_dir / f"{sid}.json")
            changed = True
            files_read += 1
            if fresh is not None:
                rows[sid], stamps[sid] = fresh, stamp
        return rows, stamps, changed, files_read

    def _state(self, session_dir: Path, index_file: Path) -> _IndexState:
        with self._lock:
            # The store passes its own Path objects: the hot path converts and compares nothing.
            state = self._states.get(index_file)
            if state is not None and (
                state.session_dir is session_dir or state.session_dir == Path(session_dir)
            ):
                return state
        return self._load_state(_as_path(session_dir), _as_path(index_file))

    def _load_state(self, session_dir: Path, key: Path) -> _IndexState:
        with self._lock:
            state = self._states.get(key)
            if state is not None and state.session_dir == session_dir:
                return state
            state = _IndexState(session_dir, key)
            rows, state.stamps, changed, files_read = self._build_rows(
                state.session_dir, key, trust_index=True
            )
            state.order = SidebarOrder(rows)
            self._states[key] = state
            if files_read > _SYNC_REBUILD_FILES:
                state.dirty = True
                self._flush_state(state)  # an expensive rebuild is kept at once
            elif changed or not key.exists():
                self._schedule(state)
            return state

    def add_listener(
        self, changed: Callable[[str, dict[str, Any] | None], None], reset: Callable[[], None]
    ) -> None:
        """``changed`` hears each saved row (None: removed); ``reset`` hears that the rows were rebuilt."""
        self._listeners.append((changed, reset))

    def _tell(self, sid: str | None, row: dict[str, Any] | None) -> None:
        for changed, reset in self._listeners:
            try:
                changed(sid, row) if sid is not None else reset()
            except Exception:  # noqa: BLE001 - a listener never breaks a save
                log.exception("index listener failed")

    def note_saved(
        self, session_dir: Path, index_file: Path, row: dict[str, Any], stat: tuple[int, int]
    ) -> None:
        """Record a just-saved session's row; ``_index.json`` follows within ``index_flush_delay``."""
        state = self._state(session_dir, index_file)
        row = dict(row)  # the index's own: the caller may go on changing its dict
        sid = row["session_id"]
        with self._lock:
            state.order.put(sid, row)
            state.stamps[sid] = _stamp(stat[0], stat[1])
            state.version += 1
            self._schedule(state)
        self._tell(sid, row)

    def note_removed(self, session_dir: Path, index_file: Path, sid: str) -> None:
        state = self._state(session_dir, index_file)
        with self._lock:
            removed = sid in state.order
            if removed:
                state.order.remove(sid)
                state.stamps.pop(sid, None)
                state.encoded.pop(sid, None)
                state.version += 1
                self._schedule(state)
        if removed:
            self._tell(sid, None)

    def _schedule(self, state: _IndexState) -> None:
        state.dirty = True
        if state.timer is None:
            delay = max(float(_config.setting("index_flush_delay")), _FLUSH_SPACING * state.flush_seconds)
            state.timer = threading.Timer(delay, self._flush_state, args=(state,))
            state.timer.daemon = True
            state.timer.start()

    def all_rows(self, session_dir: Path, index_file: Path) -> list[dict[str, Any]]:
        """Copies of every row, newest first (pinned or not); made again after a change, in O(sessions), so
        never on a request's path."""
        state = self._state(session_dir, index_file)
        with self._lock:
            version, listing = state.version, state.listing
            if listing is not None and listing[0] == version:
                return list(listing[1])
            rows = state.order.newest_first()
        copies = [dict(row) for row in rows]
        with self._lock:
            if state.version == version:
                state.listing = (version, copies)
        return list(copies)

    def newest_first(self, session_dir: Path, index_file: Path) -> Iterator[dict[str, Any]]:
        """The rows newest first, pinned or not, read as the walk reaches them (for a walk that may stop early);
        the rows are the index's own: read them, never change them."""
        state = self._state(session_dir, index_file)
        with self._lock:
            return state.order.newest_first()

    def page(
        self,
        session_dir: Path,
        index_file: Path,
        before: Key | None,
        limit: int | None,
        project: str | None = None,
    ) -> Page:
        """A page of the sidebar order (``api.rules.sidebar_order.SidebarOrder.page``), of one project's rows when
        ``project`` is given: O(page size + log n)."""
        state = self._state(session_dir, index_file)
        with self._lock:
            return state.order.page(before, limit, project)

    def in_project(self, session_dir: Path, index_file: Path, project: str) -> list[str]:
        """The ids of a project's sessions, newest first: O(the project's size)."""
        state = self._state(session_dir, index_file)
        with self._lock:
            return state.order.in_project(project)

    def count(self, session_dir: Path, index_file: Path) -> int:
        state = self._state(session_dir, index_file)
        with self._lock:
            return len(state.order)

    def row(self, session_dir: Path, index_file: Path, sid: str) -> dict[str, Any] | None:
        """A copy of one session's row; None when the index has none."""
        state = self._state(session_dir, index_file)
        with self._lock:
            found = state.order.get(sid)
        return dict(found) if found is not None else None

    def has_row(self, session_dir: Path, index_file: Path, sid: str) -> bool:
        state = self._state(session_dir, index_file)
        with self._lock:
            return sid in state.order

    def _file_bytes(
        self,
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
                hit = (row, jsonio.dumps_kept(dict(row, _stat=stamps.get(sid))))
                fresh.append(hit)
            parts.append(hit[1])
        with self._lock:
            for row, data in fresh:
                if state.order.get(row["session_id"]) is row:
                    state.encoded[row["session_id"]] = (row, data)
        return b"[" + b",".join(parts) + b"]"

    def _flush_state(self, state: _IndexState) -> None:
        with state.flush_lock:
            with self._lock:
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
                atomic.write_bytes_durable(state.index_file, self._file_bytes(state, rows, stamps, encoded))
                state.flush_seconds = time.monotonic() - started
            except (OSError, TypeError, ValueError) as exc:
                log.warning("could not write %s: %s", state.index_file, exc)
                with self._lock:
                    state.dirty = True

    def flush(self, index_file: Path | None = None) -> None:
        """Write pending index changes now (all folders when ``index_file`` is None)."""
        with self._lock:
            states = (
                list(self._states.values())
                if index_file is None
                else [s for k, s in self._states.items() if k == Path(index_file)]
            )
        for state in states:
            self._flush_state(state)

    def forget(self, session_dir: Path) -> None:
        """Drop the in-memory index of a folder (files changed behind it); the next read re-validates."""
        flush_states = []
        with self._lock:
            for key, state in list(self._states.items()):
                if state.session_dir == Path(session_dir):
                    flush_states.append(state)
                    del self._states[key]
        for state in flush_states:
            self._flush_state(state)
        if flush_states:
            self._tell(None, None)

    def rebuild_index_file(self, session_dir: Path, index_file: Path | None = None) -> int:
        """Rebuild ``_index.json`` from the session files alone; returns the row count."""
        session_dir = Path(session_dir)
        index_file = Path(index_file) if index_file else session_dir / "_index.json"
        self.forget(session_dir)
        rows, stamps, _, _ = self._build_rows(session_dir, index_file, trust_index=False)
        state = _IndexState(session_dir, index_file)
        state.order, state.stamps = SidebarOrder(rows), stamps
        state.dirty = True
        with self._lock:
            self._states[index_file] = state
        self._flush_state(state)
        self._tell(None, None)
        return len(rows)

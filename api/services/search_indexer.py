"""Keeping ``search.db`` true to the session files: one background thread that checks the index at start
(made again when missing or damaged; each session whose file's size or mtime_ns differs from the stamp
its rows were made from is indexed again, each one gone is dropped), then follows every durable save and
removal the sidebar index hears of. A save only puts the session's id on a queue, after it returned; a
failure here is logged and never reaches the save. Until the first check ends, ``ready`` is False and
search reads the files; ``status()`` tells how far the rebuild is.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
import time
from collections import deque
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from api.rules import jsonio
from api.rules.messages import message_text
from api.rules.session_fields import is_safe_session_id
from api.services.session_views import is_display_role
from api.store import session_files
from api.store.in_use import InUse
from api.store.search_index import Entry, IndexBroken, SearchIndex

log = logging.getLogger("talaria.search")

BATCH = 200  # sessions a rebuild writes per transaction
_RESCAN = object()  # the sidebar index was rebuilt: compare every file again
_STOP = object()


def _text_field(data: dict[str, Any], name: str) -> str | None:
    value = data.get(name)
    return value if isinstance(value, str) and value else None


def source_of(data: dict[str, Any]) -> str:
    """A Talaria session's source for the filter: its ``session_source`` ("fork", ...) or ``webui``."""
    return _text_field(data, "session_source") or "webui"


def entry_from(sid: str, st: os.stat_result, raw: bytes) -> Entry:
    """The index's rows of one session file; a file that does not parse gives none (the scan finds none
    in it either) but keeps its stamp, so it is not read again until it changes."""
    try:
        data = jsonio.loads(raw)
    except Exception:  # noqa: BLE001 - a damaged file simply holds no words
        data = None
    if not isinstance(data, dict):
        data = {}
    messages = data.get("messages")
    texts: list[tuple[int, str]] = []
    if isinstance(messages, list):
        for idx, msg in enumerate(messages):
            if isinstance(msg, dict) and is_display_role(msg.get("role")):
                text = message_text(msg)
                if text.strip():
                    texts.append((idx, text))
    updated = data.get("updated_at")
    return Entry(
        sid=sid,
        size=st.st_size,
        mtime_ns=st.st_mtime_ns,
        updated_at=float(updated)
        if isinstance(updated, (int, float)) and not isinstance(updated, bool)
        else None,
        title=_text_field(data, "title"),
        model=_text_field(data, "model"),
        workspace=_text_field(data, "workspace"),
        project_id=_text_field(data, "project_id"),
        source=source_of(data),
        texts=tuple(texts),
    )


def _disk_stamps(session_dir: Path) -> dict[str, tuple[int, int]]:
    out: dict[str, tuple[int, int]] = {}
    try:
        entries = os.scandir(session_dir)
    except FileNotFoundError:
        return out
    with entries:
        for entry in entries:
            name = entry.name
            if name.endswith(".json") and is_safe_session_id(name[:-5]):
                try:
                    if entry.is_file(follow_symlinks=False):
                        st = entry.stat(follow_symlinks=False)
                        out[name[:-5]] = (st.st_size, st.st_mtime_ns)
                except OSError:
                    continue
    return out


class Indexer:
    """The index of one session folder and the thread that keeps it."""

    def __init__(self, session_dir: Path, db_path: Path):
        self.session_dir = Path(session_dir)
        self.db_path = Path(db_path)
        self.index: SearchIndex | None = None
        self.ready = False
        self.failed: str | None = None
        self.done = 0
        self.total = 0
        self.update_ms: deque[float] = deque(maxlen=1000)
        self.update_cpu_ms: deque[float] = deque(maxlen=1000)
        self.rebuild_s: float | None = None  # how long the last check at start took
        self.rebuild_cpu_s: float | None = None  # the CPU time it took (what a loaded machine does not blur)
        self._queue: queue.Queue[object] = queue.Queue()
        self._busy = 0  # items taken from the queue and not yet written
        self._idle = threading.Condition()
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------------- the outside

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="search-index", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        self._queue.put(_STOP)
        if self._thread is not None:
            self._thread.join(timeout)
        if self.index is not None:
            self.index.close()

    def note(self, sid: str | None) -> None:
        """A session's file changed or went (None: every file may have); never blocks."""
        with self._idle:
            self._busy += 1
        self._queue.put(sid if sid is not None else _RESCAN)

    def wait_idle(self, timeout: float = 30.0) -> bool:
        """Wait until the first check ended and every noted change is written (for tests and benches)."""
        deadline = time.monotonic() + timeout
        with self._idle:
            while not (self.ready or self.failed) or self._busy:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._idle.wait(left)
        return True

    def status(self) -> dict[str, Any]:
        state = "ready" if self.ready else "failed" if self.failed else "rebuilding"
        out: dict[str, Any] = {
            "state": state,
            "done": self.done,
            "total": self.total,
            "progress": 1.0 if self.ready else round(self.done / self.total, 4) if self.total else 0.0,
        }
        times = sorted(self.update_ms)
        if times:
            out["update_ms"] = {
                "p50": round(times[len(times) // 2], 3),
                "p99": round(times[min(len(times) - 1, len(times) * 99 // 100)], 3),
                "max": round(times[-1], 3),
            }
        if self.rebuild_s is not None:
            out["rebuild_s"] = round(self.rebuild_s, 3)
            out["rebuild_cpu_s"] = round(self.rebuild_cpu_s or 0.0, 3)
        cpu = sorted(self.update_cpu_ms)
        if cpu:
            out["update_cpu_ms"] = {"p50": round(cpu[len(cpu) // 2], 3), "max": round(cpu[-1], 3)}
        return out

    # ------------------------------------------------------------------------- the thread

    def _run(self) -> None:
        try:
            self._open_checked()
            self._catch_up()
        except Exception as exc:  # noqa: BLE001 - search falls back to reading the files
            log.exception("search index unavailable")
            self.failed = str(exc)
        with self._idle:
            self.ready = self.failed is None
            self._idle.notify_all()
        while True:
            item = self._queue.get()
            if item is _STOP:
                return
            items = [item]
            while len(items) < BATCH:  # a burst of saves becomes one transaction
                try:
                    items.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            stop = _STOP in items
            try:
                if self.index is not None:
                    self._follow([i for i in items if i is not _STOP])
            except Exception:  # noqa: BLE001 - the next start finds the stale stamps and repairs them
                log.exception("search index update failed")
            with self._idle:
                self._busy -= len([i for i in items if i is not _STOP])
                self._idle.notify_all()
            if stop:
                return

    def _open_checked(self) -> None:
        try:
            index = SearchIndex(self.db_path)
            try:
                index.check()
            except IndexBroken:
                index.close()
                raise
        except IndexBroken as exc:
            log.warning("search index %s is damaged (%s); building it again", self.db_path.name, exc)
            for suffix in ("", "-wal", "-shm"):
                Path(str(self.db_path) + suffix).unlink(missing_ok=True)
            index = SearchIndex(self.db_path)
        self.index = index

    def _catch_up(self) -> None:
        """Index again every session whose file differs from its stamp; drop those whose file went."""
        assert self.index is not None
        started, cpu = time.perf_counter(), time.thread_time()
        indexed = self.index.stamps()
        on_disk = _disk_stamps(self.session_dir)
        stale = sorted(sid for sid, stamp in on_disk.items() if indexed.get(sid) != stamp)
        gone = [sid for sid in indexed if sid not in on_disk]
        self.done, self.total = 0, len(stale) + len(gone)
        if gone:
            self.index.apply((), gone)
            self.done += len(gone)
        for start in range(0, len(stale), BATCH):
            chunk = stale[start : start + BATCH]
            entries, removed = self._read(chunk)
            self.index.apply(entries, removed)
            self.done += len(chunk)
        self.rebuild_s, self.rebuild_cpu_s = time.perf_counter() - started, time.thread_time() - cpu
        if self.total:
            log.info("search index: %d sessions indexed again, %d dropped", len(stale), len(gone))

    def _read(self, sids: Iterable[str]) -> tuple[list[Entry], list[str]]:
        entries, removed = [], []
        for sid in sids:
            try:
                found = session_files.read_session_file(self.session_dir / f"{sid}.json")
            except (OSError, ValueError):
                found = None
            if found is None:
                removed.append(sid)
            else:
                entries.append(entry_from(sid, found[0], found[1]))
        return entries, removed

    def _follow(self, items: list[object]) -> None:
        assert self.index is not None
        if any(item is _RESCAN for item in items):
            self._catch_up()
            return
        started, cpu = time.perf_counter(), time.thread_time()
        sids = list(dict.fromkeys(i for i in items if isinstance(i, str) and is_safe_session_id(i)))
        entries, removed = self._read(sids)
        self.index.apply(entries, removed)
        if len(sids) == 1:
            self.update_ms.append((time.perf_counter() - started) * 1000)
            self.update_cpu_ms.append((time.thread_time() - cpu) * 1000)


class Indexing:
    """One app's indexer (``App.indexing``), put in use: none until ``start``, nor in processes that serve no
    search."""

    def __init__(self) -> None:
        self.indexer: Indexer | None = None

    def start(self, session_dir: Path, db_path: Path) -> Indexer:
        self.indexer = Indexer(session_dir, db_path)
        self.indexer.start()
        return self.indexer

    def stop(self) -> None:
        indexer, self.indexer = self.indexer, None
        if indexer is not None:
            indexer.stop()

    def note_changed(self, sid: str, _row: dict[str, Any] | None) -> None:
        indexer = self.indexer
        if indexer is not None:
            indexer.note(sid)

    def note_reset(self) -> None:
        indexer = self.indexer
        if indexer is not None:
            indexer.note(None)


INDEXING: InUse[Indexing] = InUse(Indexing)  # the app's (``App.indexing``), else built on first use


def indexer(indexing: Indexing | None = None) -> Indexer | None:
    """The indexer in use (None until it started)."""
    return INDEXING.get(indexing).indexer


def start(session_dir: Path, db_path: Path) -> Indexer:
    return INDEXING.get().start(session_dir, db_path)


def stop() -> None:
    INDEXING.get().stop()


def note_changed(sid: str, row: dict[str, Any] | None) -> None:
    """A session's index row changed (a save, a removal): the indexer reads its file again."""
    INDEXING.get().note_changed(sid, row)


def note_reset() -> None:
    """The index was rebuilt: the indexer checks every file."""
    INDEXING.get().note_reset()

"""The session store: one folder of session files and everything kept in memory about it.

A ``Store`` owns its folder (``<sid>.json`` files and ``_index.json``), the sidebar index of that folder
(``api.store.session_index.SessionIndex``), the cache of loaded sessions with its eviction, the per-session locks, what
memory holds about its tombstones (``api.store.tombstones``), the lock of ``projects.json`` beside it and
the one way to change a session (``with store.edit(sid) as session:``). The server builds one (through
``api.server.app.App``); a test builds one on its own folder. ``current`` is the store that ``api.store.models``' names
(``SESSION_DIR``, ``SESSIONS``, ``Session.load``...) act on: hermes-webui's module-level face over the default
app.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

from api.rules.errors import ApiError, NotFound
from api.rules.session_fields import is_safe_session_id
from api.rules.sidebar_order import Page
from api.store import atomic, session_cache, state_db, tombstones
from api.store.session_index import SessionIndex


class StoredSession(Protocol):
    """What the store asks of a session (``api.store.models.Session``)."""

    session_id: str

    def save(self, touch_updated_at: bool = True, skip_index: bool = False) -> bool: ...

    def changed_since_read(self) -> bool: ...

    def revert_to_file(self) -> None: ...

    def bind(self, store: Any) -> None: ...

    active_stream_id: Any

    @property
    def read_signature(self) -> tuple[Any, ...] | None: ...  # the file's (inode, size, mtime_ns) when read

    def compact(self) -> dict[str, Any]: ...


S = TypeVar("S", bound=StoredSession)


class Unchanged(Exception):
    """Raised inside an ``edit`` by a body that changed nothing: the edit ends without a save."""


class Store(Generic[S]):
    """A folder of sessions: its files, index, cache, locks and write path.

    ``session_type`` reads and writes the files (``api.store.models.Session``: ``load(sid, store=)``,
    ``load_metadata_only(sid, store=)``, ``stub_from_path(path)``, ``from_path(path)``).
    """

    def __init__(self, session_dir: Path, session_type: Any, index_file: Path | None = None) -> None:
        self.session_type = session_type
        self.session_dir = Path(session_dir)
        self.index_file = Path(index_file) if index_file is not None else self.session_dir / "_index.json"
        self.index = SessionIndex(session_type.stub_from_path, session_type.from_path)
        self.sessions: OrderedDict[str, S] = OrderedDict()  # the cache, least recently used first
        self.cache_lock = threading.Lock()
        self._locks: weakref.WeakValueDictionary[str, threading.RLock] = weakref.WeakValueDictionary()
        self._locks_guard = threading.Lock()
        # One lock per session while a load runs, so two requests never parse the same file twice at once.
        self.load_locks: weakref.WeakValueDictionary[str, threading.Lock] = weakref.WeakValueDictionary()
        self.load_locks_guard = threading.Lock()
        # How a session's lock is found: hermes-webui's tests replace ``api.config._get_session_agent_lock``.
        self.lock_for: Callable[[str], AbstractContextManager[Any]] = self._session_lock
        self.tombstones = tombstones.Tombstones()  # in use with the store
        self.agent_db = state_db.Reads()  # what reading the agent's state.db keeps; in use with the store
        self.swept = atomic.Swept()  # the folders swept of killed writes' temp files; in use with the store
        self.projects_lock = threading.Lock()  # one change of ``projects.json`` beside the folder at a time
        # Whether a turn of this store's app runs in a session, for its index row (None: the turns in use).
        self.turn_is_live: Callable[[str], bool] | None = None

    def point_at(self, session_dir: Path, index_file: Path | None = None) -> None:
        """Use another folder (hermes-webui's tests set ``api.models.SESSION_DIR``); the cache stays."""
        self.session_dir = Path(session_dir)
        self.index_file = Path(index_file) if index_file is not None else self.session_dir / "_index.json"

    def _session_lock(self, session_id: str) -> threading.RLock:
        with self._locks_guard:
            found = self._locks.get(session_id)
            if found is None:
                found = threading.RLock()
                self._locks[session_id] = found
            return found

    def lock(self, session_id: str) -> AbstractContextManager[Any]:
        """The per-session lock (reentrant): held for a change in memory plus its save, never across network
        I/O; readers and file moves take it too."""
        return self.lock_for(session_id)

    # ------------------------------------------------------------------ the cache

    def get(self, session_id: str, metadata_only: bool = False) -> S:
        """The cached session (reloaded when its file changed underneath), else loaded; KeyError if none."""
        found: S = session_cache.get_or_load(self, session_id, metadata_only=metadata_only)
        return found

    def put(self, session: S) -> None:
        """Cache ``session`` as the most recently used, evicting what is safe to evict over the cap."""
        session_cache.put(self, session)

    def cached(self, session_id: str) -> S | None:
        with self.cache_lock:
            return self.sessions.get(session_id)

    def drop(self, session_id: str, only: S | None = None) -> None:
        """Forget the cached object (only when it is ``only``, if given)."""
        with self.cache_lock:
            if only is None or self.sessions.get(session_id) is only:
                self.sessions.pop(session_id, None)

    # ------------------------------------------------------------------ the write path

    def load(self, session_id: str) -> S:
        """The session for a request, or a domain error a person can act on.

        An unsafe or unknown id, or a link, FIFO or device where the file should be, is ``NotFound``; a file
        that cannot be parsed is a clear 500 that points at the recovery audit.
        """
        if not is_safe_session_id(session_id):
            raise NotFound("Session not found")
        try:
            return self.get(session_id)
        except KeyError:
            raise NotFound("Session not found") from None
        except ValueError as exc:
            session_cache.log.warning("session %s is not readable as a session: %s", session_id, exc)
            raise NotFound("Session not found") from None
        except Exception as exc:  # noqa: BLE001 - a hostile or damaged file: parse errors, wrong types, depth
            session_cache.log.warning(
                "session %s could not be loaded: %s: %s", session_id, type(exc).__name__, exc
            )
            raise ApiError("Session file could not be read; run the recovery audit", status=500) from None

    @contextmanager
    def edit(self, session_id: str, *, touch_updated_at: bool = True) -> Iterator[S]:
        """Lock, load fully, yield the session, save once on a clean exit (see ``api.store.session_edit``).

        ``touch_updated_at=False`` keeps the sidebar order (metadata edits, checkpoints, markers).
        """
        with self.lock(session_id):
            session = self.load(session_id)
            try:
                yield session
            except Unchanged:
                return
            except BaseException:
                if session.changed_since_read():  # a refusal before any change keeps the object as it is
                    session.revert_to_file()
                raise
            session.save(touch_updated_at=touch_updated_at)

    def create(self, session: S, *, touch_updated_at: bool = True) -> None:
        """Save a session built in memory in this store, under its lock, then cache it; a failed save caches
        nothing."""
        session.bind(self)
        with self.lock(session.session_id):
            session.save(touch_updated_at=touch_updated_at)
            self.put(session)

    def close(self) -> None:
        """Write what the index holds that ``_index.json`` lacks (at shutdown)."""
        self.index.flush()

    # ------------------------------------------------------------------ the sidebar rows, from its index

    def row(self, session_id: str) -> dict[str, Any] | None:
        """One session's sidebar row (a copy), None when it has none."""
        return self.index.row(self.session_dir, self.index_file, session_id)

    def all_rows(self) -> list[dict[str, Any]]:
        """A copy of every row, newest first (validated against the files once). O(sessions): requests use
        the readers below, which cost what they return."""
        return self.index.all_rows(self.session_dir, self.index_file)

    def newest_first(self) -> Iterator[dict[str, Any]]:
        """The rows newest first, for a walk that stops early (read them, never change them)."""
        return self.index.newest_first(self.session_dir, self.index_file)

    def page(self, before: tuple[float, str] | None, limit: int | None, project: str | None = None) -> Page:
        return self.index.page(self.session_dir, self.index_file, before, limit, project)

    def in_project(self, project: str) -> list[str]:
        return self.index.in_project(self.session_dir, self.index_file, project)

    def count(self) -> int:
        return self.index.count(self.session_dir, self.index_file)

    def has_row(self, session_id: str) -> bool:
        return self.index.has_row(self.session_dir, self.index_file, session_id)

    def reindex_after_turn(self, session_id: str) -> None:
        """A turn of this process ended: its row stops saying "streaming" even when the file still names the
        turn (its final save failed, so no save updated the row)."""
        session = self.cached(session_id)
        signature = session.read_signature if session is not None else None
        if session is None or not session.active_stream_id or signature is None:
            return
        _ino, size, mtime_ns = signature
        self.index.note_saved(self.session_dir, self.index_file, session.compact(), (size, mtime_ns))


# The store hermes-webui's module-level names act on: the default app's, else one built from the settings on
# first use (``api.store.models.store``). One slot, the compatibility face's; everything else is held by the app.
_current: list[Store[Any]] = []
_current_guard = threading.Lock()


def current(build: Callable[[], Store[Any]]) -> Store[Any]:
    """The store in use; ``build()`` makes it when none is."""
    if _current:
        return _current[0]
    with _current_guard:
        if not _current:
            _current.append(build())
            _put_in_use(_current[0])
        return _current[0]


def use(store: Store[Any] | None) -> Store[Any] | None:
    """Make ``store`` the one the module-level names act on (None: the next use builds one); returns the one it
    replaces."""
    with _current_guard:
        previous = _current[0] if _current else None
        _current[:] = [store] if store is not None else []
        _put_in_use(store)
        return previous


def _put_in_use(store: Store[Any] | None) -> None:
    """What the store owns that code holding no store reaches, put in use with it (None: built on next use)."""
    tombstones.TOMBSTONES.use(store.tombstones if store is not None else None)
    state_db.READS.use(store.agent_db if store is not None else None)
    atomic.SWEPT.use(store.swept if store is not None else None)


def in_use() -> Store[Any] | None:
    """The store in use, None while none is (nothing is built)."""
    return _current[0] if _current else None

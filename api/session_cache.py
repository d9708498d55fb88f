"""The in-memory session cache: a cached object is fresh while its file is the one it read or wrote.

``api.models.get_session`` and ``cache_session`` call these with the cache and lock they read at call time
(tests patch ``api.models``), and with ``Session`` for loading; this module keeps no session state of its
own beyond one lock per session while a load runs, so two requests never parse the same file twice at once.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from typing import Any

from api import config as _config
from api.session_fields import is_safe_session_id
from api.session_files import disk_sig

_LOAD_LOCKS: weakref.WeakValueDictionary = weakref.WeakValueDictionary()  # sid -> lock while a load runs
_LOAD_LOCKS_GUARD = threading.Lock()


def is_stale(session: Any) -> bool:
    """True when the file changed under a cached object that holds nothing unsaved."""
    if session.metadata_only or session.active_stream_id or session.pending_user_message:
        return False
    if session.saved_message_count is None or session.saved_message_count != len(session.messages):
        return False
    return disk_sig(session.path) != session.read_signature


def _usable(cached: Any, metadata_only: bool) -> bool:
    return not (cached.metadata_only and not metadata_only) and not is_stale(cached)


def get_or_load(
    sid: str, cache: OrderedDict, lock: Any, session_class: Any, *, metadata_only: bool = False
) -> Any:
    """The cached session (reloaded when the file changed underneath), else loaded from disk; KeyError if none.

    ``metadata_only`` may answer a stub read from the file's prefix, which is never cached.
    """
    if not is_safe_session_id(sid):
        raise KeyError(sid)
    with lock:
        cached = cache.get(sid)
        if cached is not None:
            if cached.session_id != sid:
                del cache[sid]
                cached = None
            else:
                cache.move_to_end(sid)
    if cached is not None and _usable(cached, metadata_only):
        return cached
    if metadata_only:
        stub = session_class.load_metadata_only(sid)
        if stub is None:
            raise KeyError(sid)
        return stub
    with _LOAD_LOCKS_GUARD:
        load_lock = _LOAD_LOCKS.setdefault(sid, threading.Lock())
    with load_lock:
        with lock:
            cached = cache.get(sid)
        if cached is not None and _usable(cached, False):
            return cached
        session = session_class.load(sid)
        if session is None:
            raise KeyError(sid)
        put(session, cache, lock)
    return session


def put(session: Any, cache: OrderedDict, lock: Any) -> None:
    """Cache ``session`` as the most recently used, evicting what is safe to evict over the cap."""
    with lock:
        cache[session.session_id] = session
        cache.move_to_end(session.session_id)
        _config.evict_sessions_over_cap()

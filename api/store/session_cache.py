"""The in-memory session cache: a cached object is fresh while its file is the one it read or wrote, and
over the cap the oldest entries that are provably safe to drop go (never a live turn or unsaved rows).

``api.store.session_store.Store`` calls these with itself: the cache, its lock, the load locks and the session type are the
store's; this module keeps no state.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from api.rules.session_fields import is_safe_session_id
from api.store import config as _config
from api.store.session_files import disk_sig

if TYPE_CHECKING:
    from api.store.session_store import Store

log = logging.getLogger("talaria.admin")
_NEW_SESSION_GRACE_S = 1800.0  # a never-saved empty session is kept this long


def is_stale(session: Any) -> bool:
    """True when the file changed under a cached object that holds nothing unsaved."""
    if session.metadata_only or session.active_stream_id or session.pending_user_message:
        return False
    if session.saved_message_count is None or session.saved_message_count != len(session.messages):
        return False
    return bool(disk_sig(session.path) != session.read_signature)


def _usable(cached: Any, metadata_only: bool) -> bool:
    return not (cached.metadata_only and not metadata_only) and not is_stale(cached)


def get_or_load(store: Store[Any], sid: str, *, metadata_only: bool = False) -> Any:
    """The cached session (reloaded when the file changed underneath), else loaded from disk; KeyError if none.

    ``metadata_only`` may answer a stub read from the file's prefix, which is never cached.
    """
    if not is_safe_session_id(sid):
        raise KeyError(sid)
    cache, lock = store.sessions, store.cache_lock
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
        stub = store.session_type.load_metadata_only(sid, store=store)
        if stub is None:
            raise KeyError(sid)
        return stub
    with store.load_locks_guard:
        load_lock = store.load_locks.setdefault(sid, threading.Lock())
    with load_lock:
        with lock:
            cached = cache.get(sid)
        if cached is not None and _usable(cached, False):
            return cached
        session = store.session_type.load(sid, store=store)
        if session is None:
            raise KeyError(sid)
        put(store, session)
    return session


def put(store: Store[Any], session: Any) -> None:
    """Cache ``session`` as the most recently used, evicting what is safe to evict over the cap."""
    with store.cache_lock:
        store.sessions[session.session_id] = session
        store.sessions.move_to_end(session.session_id)
        evict_sessions_over_cap(store.sessions)


def _evictable(session: Any, now: float) -> bool:
    if getattr(session, "active_stream_id", None) or getattr(session, "pending_user_message", None):
        return False
    if getattr(session, "pending_started_at", None):
        return False
    if getattr(session, "metadata_only", False):
        return True
    saved = getattr(session, "saved_message_count", None)
    if saved is None:  # never saved: protect a fresh shell for a while, and always while drafting
        if getattr(session, "composer_draft", None):
            return False
        created = getattr(session, "created_at", None) or 0
        return bool(not getattr(session, "messages", None) and now - float(created) > _NEW_SESSION_GRACE_S)
    return bool(saved >= len(getattr(session, "messages", []) or []))


def evict_sessions_over_cap(
    cache: OrderedDict[str, Any], cap: int | None = None, clock: Callable[[], float] = time.time
) -> int:
    """Drop the oldest provably safe entries until ``cache`` fits. Caller holds the cache's lock."""
    cap = _config.setting("sessions_cache_max") if cap is None else cap
    over = len(cache) - cap
    if over <= 0:
        return 0
    now = clock()
    dropped = 0
    for sid in list(cache.keys()):
        if dropped >= over:
            break
        if _evictable(cache[sid], now):
            del cache[sid]
            dropped += 1
    return dropped

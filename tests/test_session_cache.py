"""The session cache's eviction: over the cap, only entries that are provably safe to drop go."""

from __future__ import annotations

import time

from api.store import session_cache
from api.store.models import Session


def _cached(store, sid, **kw):
    s = Session(session_id=sid, **kw)
    store.sessions[sid] = s
    return s


def test_eviction_never_drops_live_turns_or_unsaved_messages(store):
    live = _cached(store, "live", active_stream_id="x")
    unsaved = _cached(store, "unsaved", messages=[{"role": "user", "content": "hi"}])
    pending = _cached(store, "pending", pending_user_message="hello")
    saved = _cached(store, "saved", messages=[{"role": "user", "content": "hi"}])
    saved.save()
    with store.cache_lock:
        session_cache.evict_sessions_over_cap(store.sessions, cap=0)
    assert "saved" not in store.sessions
    assert {"live", "unsaved", "pending"} <= set(store.sessions)
    assert live and unsaved and pending


def test_fresh_empty_shell_is_protected_for_a_while(store):
    _cached(store, "fresh")
    old = _cached(store, "old-shell", created_at=time.time() - 7200)
    with store.cache_lock:
        session_cache.evict_sessions_over_cap(store.sessions, cap=0)
    assert "fresh" in store.sessions
    assert "old-shell" not in store.sessions
    assert old

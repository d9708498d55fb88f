"""The session cache's eviction: over the cap, only entries that are provably safe to drop go."""

from __future__ import annotations

import time

from api import config, session_cache
from api.models import Session


def _cached(sid, **kw):
    s = Session(session_id=sid, **kw)
    config.SESSIONS[sid] = s
    return s


def test_eviction_never_drops_live_turns_or_unsaved_messages(state_dir):
    live = _cached("live", active_stream_id="x")
    unsaved = _cached("unsaved", messages=[{"role": "user", "content": "hi"}])
    pending = _cached("pending", pending_user_message="hello")
    saved = _cached("saved", messages=[{"role": "user", "content": "hi"}])
    saved.save()
    with config.LOCK:
        session_cache.evict_sessions_over_cap(config.SESSIONS, cap=0)
    assert "saved" not in config.SESSIONS
    assert {"live", "unsaved", "pending"} <= set(config.SESSIONS)
    assert live and unsaved and pending


def test_fresh_empty_shell_is_protected_for_a_while(state_dir):
    _cached("fresh")
    old = _cached("old-shell", created_at=time.time() - 7200)
    with config.LOCK:
        session_cache.evict_sessions_over_cap(config.SESSIONS, cap=0)
    assert "fresh" in config.SESSIONS
    assert "old-shell" not in config.SESSIONS
    assert old

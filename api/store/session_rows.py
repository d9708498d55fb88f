"""A session's index row: the fields ``_index.json`` keeps and the sidebar reads (``session_list`` picks
the ones it shows), derived from the session when it is saved. Whether the row is streaming is asked of the
turns of the session's store's app (else of the turns in use), not of the file."""

from __future__ import annotations

from itertools import repeat
from typing import Any, cast

from api.agent import turn_journal
from api.rules.messages import message_text, message_time, visible_message_count
from api.rules.session_fields import INDEX_COPIED


def _copied(group: str) -> tuple[str, ...]:
    return tuple(f.name for f in INDEX_COPIED if f.index == group)


_ALWAYS, _IF_SET, _WORKTREE, _RECOVERY = (_copied(g) for g in ("always", "if_set", "worktree", "recovery"))


def index_row(session: Any) -> dict[str, Any]:
    """The row of ``session`` (an ``api.store.models.Session``): the fields the table marks for the index, then
    the figures computed from it."""
    row = {name: getattr(session, name) for name in _ALWAYS}
    row.update((name, getattr(session, name)) for name in _IF_SET if getattr(session, name))
    if session.worktree_path:
        row.update((name, getattr(session, name)) for name in _WORKTREE)
    if session.compression_recovery_source_session_id or session.compression_recovery_action:
        row.update((name, getattr(session, name)) for name in _RECOVERY)
    reads = session.cache_read_tokens or 0
    prompt_total = (session.input_tokens or 0) + reads
    row["cache_hit_percent"] = round(100.0 * reads / prompt_total, 1) if prompt_total else 0
    row["message_count"] = session.message_count()
    row["user_message_count"] = session.user_message_count()
    row["last_message_at"] = session.last_message_at()
    # What the sidebar counts; a metadata-only stub has no messages to count (None: the page falls back).
    row["visible_message_count"] = None if session.metadata_only else visible_message_count(session.messages)
    row["has_pending_user_message"] = bool(session.pending_user_message)
    row["queued_count"] = (
        session._metadata_queued_count if session._loaded_metadata_only else len(session.queued_messages)
    )
    # A file can name a turn no turn of this process runs (its final save failed, or the process is
    # gone): the sidebar says "streaming" only while one does.
    row["is_streaming"] = bool(session.active_stream_id) and _turn_is_live(session)
    return row


def _turn_is_live(session: Any) -> bool:
    asks = session.home().turn_is_live
    if asks is not None:
        return bool(asks(session.session_id))
    return turn_journal.live_turn_for(session.session_id) is not None


# The figures of the row, read from the file's prefix when the session was loaded without its messages.


def message_count(session: Any) -> int:
    if session._loaded_metadata_only and session._metadata_message_count is not None:
        return cast("int", session._metadata_message_count)
    count = len(session.messages)
    if not count and session.pending_user_message:
        count = 1
    return count


def has_sidebar_figures(session: Any) -> bool:
    """A stub whose file carries every figure of its sidebar row (files Talaria wrote do)."""
    return None not in (
        session._metadata_message_count,
        session._metadata_user_message_count,
        session._metadata_last_message_at,
    )


def user_message_count(session: Any) -> int:
    if session._loaded_metadata_only and session._metadata_user_message_count is not None:
        return cast("int", session._metadata_user_message_count)
    try:  # at C speed: this runs on every save
        return list(map(dict.get, session.messages, repeat("role"))).count("user")
    except TypeError:  # a row that is not a dict
        return sum(1 for m in session.messages if isinstance(m, dict) and m.get("role") == "user")


def last_message_at(session: Any) -> float:
    if session._loaded_metadata_only and session._metadata_last_message_at is not None:
        return cast("float", session._metadata_last_message_at)
    if session.pending_user_message and session.pending_started_at:
        return cast("float", session.pending_started_at)
    for msg in reversed(session.messages):
        if not isinstance(msg, dict) or msg.get("role") == "tool":
            continue
        if msg.get("_partial") and not message_text(msg).strip():
            continue
        ts = message_time(msg)
        if ts is not None:
            return ts
    return cast("float", session.updated_at)

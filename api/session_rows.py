"""A session's index row: the fields ``_index.json`` keeps and the sidebar reads (``session_list`` picks
the ones it shows), derived from the session when it is saved. Whether the row is streaming is asked of the
turns of this process, not of the file."""

from __future__ import annotations

from itertools import repeat
from typing import Any

from api import turn_journal
from api.messages import message_text, message_time, visible_message_count


def index_row(session: Any) -> dict[str, Any]:
    """The row of ``session`` (an ``api.models.Session``)."""
    reads = session.cache_read_tokens or 0
    prompt_total = (session.input_tokens or 0) + reads
    row = {
        "session_id": session.session_id,
        "title": session.title,
        "workspace": session.workspace,
        "model": session.model,
        "model_provider": session.model_provider,
        "message_count": session.message_count(),
        "created_at": session.created_at,
        "updated_at": session.updated_at,
        "last_message_at": session.last_message_at(),
        "pinned": session.pinned,
        "archived": session.archived,
        "project_id": session.project_id,
        "profile": session.profile,
        "input_tokens": session.input_tokens,
        "output_tokens": session.output_tokens,
        "estimated_cost": session.estimated_cost,
        "cache_read_tokens": session.cache_read_tokens,
        "cache_write_tokens": session.cache_write_tokens,
        "cache_hit_percent": round(100.0 * reads / prompt_total, 1) if prompt_total else 0,
        "personality": session.personality,
    }
    for name in (
        "compression_anchor_visible_idx", "compression_anchor_message_key", "compression_anchor_summary",
        "pre_compression_snapshot", "context_engine", "compression_anchor_engine", "compression_anchor_mode",
        "compression_anchor_details", "context_engine_state", "context_length", "threshold_tokens",
        "last_prompt_tokens", "post_compression_context_tokens_estimate", "compression_recovery",
        "recommended_recovery_action", "gateway_routing", "gateway_routing_history", "manual_title",
    ):  # fmt: skip
        row[name] = getattr(session, name)
    if session.parent_session_id:
        row["parent_session_id"] = session.parent_session_id
    row["created_workspace"] = session.created_workspace
    if session.compression_recovery_source_session_id or session.compression_recovery_action:
        row["compression_recovery_source_session_id"] = session.compression_recovery_source_session_id
        row["compression_recovery_action"] = session.compression_recovery_action
    if session.worktree_path:
        for name in ("worktree_path", "worktree_branch", "worktree_repo_root", "worktree_created_at"):
            row[name] = getattr(session, name)
    row["user_message_count"] = session.user_message_count()
    # What the sidebar counts; a metadata-only stub has no messages to count (None: the page falls back).
    row["visible_message_count"] = None if session.metadata_only else visible_message_count(session.messages)
    for name in ("active_stream_id", "pending_user_message"):
        row[name] = getattr(session, name)
    row["has_pending_user_message"] = bool(session.pending_user_message)
    row["queued_count"] = (
        session._metadata_queued_count if session._loaded_metadata_only else len(session.queued_messages)
    )
    for name in (
        "is_cli_session", "source_tag", "raw_source", "session_source", "source_label", "read_only",
        "enabled_toolsets", "composer_draft", "process_wakeup_pause", "share_token", "share_created_at",
        "agent_session_id",
    ):  # fmt: skip
        row[name] = getattr(session, name)
    # A file can name a turn no turn of this process runs (its final save failed, or the process is
    # gone): the sidebar says "streaming" only while one does.
    row["is_streaming"] = (
        bool(session.active_stream_id) and turn_journal.live_turn_for(session.session_id) is not None
    )
    return row


# The figures of the row, read from the file's prefix when the session was loaded without its messages.


def message_count(session: Any) -> int:
    if session._loaded_metadata_only and session._metadata_message_count is not None:
        return session._metadata_message_count
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
        return session._metadata_user_message_count
    try:  # at C speed: this runs on every save
        return list(map(dict.get, session.messages, repeat("role"))).count("user")
    except TypeError:  # a row that is not a dict
        return sum(1 for m in session.messages if isinstance(m, dict) and m.get("role") == "user")


def last_message_at(session: Any) -> float:
    if session._loaded_metadata_only and session._metadata_last_message_at is not None:
        return session._metadata_last_message_at
    if session.pending_user_message and session.pending_started_at:
        return session.pending_started_at
    for msg in reversed(session.messages):
        if not isinstance(msg, dict) or msg.get("role") == "tool":
            continue
        if msg.get("_partial") and not message_text(msg).strip():
            continue
        ts = message_time(msg)
        if ts is not None:
            return ts
    return session.updated_at

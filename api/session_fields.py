"""The session file's field table: names, order and normalisation (docs/session-model.md, "The file").

Pure data and small coercion helpers; ``api.models.Session`` applies them.
"""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path
from typing import Any, TypeGuard

from api.messages import message_text as message_text  # re-exported: its importers predate api.messages

# A leading "_" is reserved for the folder's own files (_index.json, tombstones).
SAFE_SESSION_ID = re.compile(r"[A-Za-z0-9-][A-Za-z0-9_-]{0,199}")


def is_safe_session_id(sid: Any) -> TypeGuard[str]:
    return isinstance(sid, str) and SAFE_SESSION_ID.fullmatch(sid) is not None


def new_session_id() -> str:
    return uuid.uuid4().hex[:12]


# Metadata first: a reader of the first 64 KiB (up to "messages") gets every one of these.
METADATA_FIELDS: tuple[str, ...] = (
    "session_id", "title", "workspace", "created_workspace", "model", "model_provider",
    "model_explicit_pick_signature", "created_at", "updated_at", "pinned", "archived", "project_id",
    "profile", "input_tokens", "output_tokens", "estimated_cost", "cache_read_tokens",
    "cache_write_tokens", "personality", "active_stream_id", "pending_user_message",
    "pending_attachments", "pending_started_at", "pending_user_source",
    "compression_anchor_visible_idx", "compression_anchor_message_key", "compression_anchor_summary",
    "pre_compression_snapshot", "context_engine", "compression_anchor_engine",
    "compression_anchor_mode", "compression_anchor_details", "context_engine_state", "context_length",
    "threshold_tokens", "last_prompt_tokens", "post_compression_context_tokens_estimate",
    "compression_recovery", "recommended_recovery_action", "compression_recovery_source_session_id",
    "compression_recovery_action", "truncation_watermark", "truncation_boundary", "clear_generation",
    "intentional_shrink_generation", "gateway_routing", "gateway_routing_history",
    "llm_title_generated", "manual_title", "parent_session_id", "worktree_path", "worktree_branch",
    "worktree_repo_root", "worktree_created_at", "is_cli_session", "source_tag", "raw_source",
    "session_source", "source_label", "read_only", "enabled_toolsets", "composer_draft",
    "process_wakeup_pause", "share_token", "share_created_at", "agent_session_id",
)  # fmt: skip

BULK_FIELDS: tuple[str, ...] = ("messages", "tool_calls", "anchor_activity_scenes")

# Talaria's own fields, written after the bulky lists. hermes-webui drops keys it does not know;
# each of these has a safe meaning when absent.
TALARIA_FIELDS: tuple[str, ...] = (
    "context_messages",
    "compression_generation",
    "compression_undo",
    "pending_question",
    "reasoning_effort",
    "queued_messages",
)


class SessionFields:
    """The fields above, declared with the type a loaded session holds (``Any`` where a file's value is
    kept as it is). ``api.models.Session`` inherits them, so tools see its attributes; a test checks that
    these name exactly the fields of the table."""

    session_id: str
    title: Any
    workspace: str
    created_workspace: str
    model: Any
    model_provider: str | None
    model_explicit_pick_signature: Any
    created_at: Any
    updated_at: Any
    pinned: bool
    archived: bool
    project_id: Any
    profile: Any
    input_tokens: Any
    output_tokens: Any
    estimated_cost: Any
    cache_read_tokens: Any
    cache_write_tokens: Any
    personality: Any
    active_stream_id: Any
    pending_user_message: Any
    pending_attachments: list[Any]
    pending_started_at: Any
    pending_user_source: Any
    compression_anchor_visible_idx: Any
    compression_anchor_message_key: Any
    compression_anchor_summary: Any
    pre_compression_snapshot: bool
    context_engine: Any
    compression_anchor_engine: Any
    compression_anchor_mode: Any
    compression_anchor_details: dict[str, Any]
    context_engine_state: dict[str, Any]
    context_length: Any
    threshold_tokens: Any
    last_prompt_tokens: Any
    post_compression_context_tokens_estimate: int | None
    compression_recovery: dict[str, Any]
    recommended_recovery_action: Any
    compression_recovery_source_session_id: str | None
    compression_recovery_action: str | None
    truncation_watermark: float | None
    truncation_boundary: float | None
    clear_generation: str | None
    intentional_shrink_generation: str | None
    gateway_routing: dict[str, Any] | None
    gateway_routing_history: list[Any]
    llm_title_generated: bool
    manual_title: bool
    parent_session_id: Any
    worktree_path: str | None
    worktree_branch: str | None
    worktree_repo_root: str | None
    worktree_created_at: Any
    is_cli_session: bool
    source_tag: Any
    raw_source: Any
    session_source: Any
    source_label: Any
    read_only: bool
    enabled_toolsets: Any
    composer_draft: dict[str, Any]
    process_wakeup_pause: dict[str, Any]
    share_token: str | None
    share_created_at: Any
    agent_session_id: Any  # the agent's session (state.db) this one continues, if imported
    messages: list[Any]
    tool_calls: list[Any]
    anchor_activity_scenes: dict[str, Any]
    context_messages: list[Any]
    compression_generation: str | None
    compression_undo: dict[str, Any] | None
    pending_question: dict[str, Any] | None
    reasoning_effort: str | None
    queued_messages: list[dict[str, Any]]  # messages waiting for the live turn to end (api.queue_items)


# Computed at save and written ahead of "messages", so a prefix read gives the whole sidebar row.
DERIVED_KEYS: frozenset[str] = frozenset(
    {"message_count", "anchor_scene_index", "user_message_count", "last_message_at", "queued_count"}
)

BOOL_FIELDS = frozenset(
    {
        "pinned",
        "archived",
        "pre_compression_snapshot",
        "llm_title_generated",
        "manual_title",
        "read_only",
        "is_cli_session",
    }
)
ZERO_FIELDS = frozenset({"input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens"})
DICT_FIELDS = frozenset(
    {
        "compression_anchor_details",
        "context_engine_state",
        "compression_recovery",
        "composer_draft",
        "anchor_activity_scenes",
        "process_wakeup_pause",
    }
)
LIST_FIELDS = frozenset(
    {"messages", "tool_calls", "pending_attachments", "gateway_routing_history", "context_messages"}
)
STRIPPED_STR_FIELDS = frozenset(
    {"compression_recovery_source_session_id", "compression_recovery_action", "share_token"}
)
FLOAT_OR_NONE_FIELDS = frozenset({"truncation_watermark", "truncation_boundary"})
PATH_OR_NONE_FIELDS = frozenset({"worktree_path", "worktree_repo_root"})

KNOWN_FIELDS: frozenset[str] = frozenset(METADATA_FIELDS) | frozenset(BULK_FIELDS) | frozenset(TALARIA_FIELDS)


def resolve_path_str(value: Any) -> str:
    return str(Path(str(value)).expanduser().resolve())


def float_or_none(value: Any) -> float | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return out if out == out and out not in (float("inf"), float("-inf")) else None


def non_negative_int_or_none(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    try:
        out = int(value)
    except (TypeError, ValueError):
        return None
    return out if out > 0 else None


def count_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def normalise_field(name: str, value: Any) -> Any:
    """A metadata field's value as a session holds it, whatever the file had (missing, wrong type)."""
    if name in BOOL_FIELDS:
        return bool(value)
    if name in ZERO_FIELDS:
        return value or 0
    if name in DICT_FIELDS:
        return value if isinstance(value, dict) else {}
    if name in LIST_FIELDS:
        return value if isinstance(value, list) else []
    if name in STRIPPED_STR_FIELDS:
        return str(value).strip() if value else None
    if name in FLOAT_OR_NONE_FIELDS:
        return float_or_none(value)
    if name in PATH_OR_NONE_FIELDS:
        return resolve_path_str(value) if value else None
    if name == "project_id":
        return value or None
    if name == "agent_session_id":
        return value if is_safe_session_id(value) else None
    if name == "clear_generation" or name == "intentional_shrink_generation":
        return value if isinstance(value, str) and value else None
    if name == "gateway_routing":
        return value if isinstance(value, dict) else None
    if name == "worktree_branch":
        return str(value) if value else None
    if name == "title":
        return value or "Untitled"
    return value


def _partial_signature(msg: dict[str, Any]) -> tuple[str, str, tuple[str, ...]]:
    calls = msg.get("tool_calls") or msg.get("_partial_tool_calls") or []
    call_sig = (
        tuple(json.dumps(c, sort_keys=True, default=str) for c in calls) if isinstance(calls, list) else ()
    )
    content = msg.get("content")
    reasoning = msg.get("reasoning")
    return (
        content.strip() if isinstance(content, str) else repr(content),
        reasoning.strip() if isinstance(reasoning, str) else "",
        call_sig,
    )


def collapse_adjacent_duplicate_partials(messages: list[Any]) -> tuple[list[Any], int]:
    """Drop a ``_partial`` row identical to the ``_partial`` row right before it."""
    if not any("_partial" in m for m in messages if type(m) is dict):
        return messages, 0
    out: list[Any] = []
    prev_sig: tuple[str, str, tuple[str, ...]] | None = None
    dropped = 0
    for msg in messages:
        if isinstance(msg, dict) and msg.get("_partial"):
            sig = _partial_signature(msg)
            if sig == prev_sig:
                dropped += 1
                continue
            prev_sig = sig
        else:
            prev_sig = None
        out.append(msg)
    return out, dropped

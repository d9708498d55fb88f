"""The session file's field table: names, order and normalisation (docs/session-model.md, "The file").

Pure data and small coercion helpers; ``api.store.models.Session`` applies them.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeGuard

from api.rules import queue_items, version_rules
from api.rules.messages import (
    message_text as message_text,  # re-exported: its importers predate api.rules.messages
)

# A leading "_" is reserved for the folder's own files (_index.json, tombstones).
SAFE_SESSION_ID = re.compile(r"[A-Za-z0-9-][A-Za-z0-9_-]{0,199}")


def is_safe_session_id(sid: Any) -> TypeGuard[str]:
    return isinstance(sid, str) and SAFE_SESSION_ID.fullmatch(sid) is not None


def new_session_id() -> str:
    return uuid.uuid4().hex[:12]


@dataclass(frozen=True)
class Field:
    """One key of a session file or of its index row.

    ``place``: ``metadata`` (written before ``messages``, so a prefix read has it), ``bulk`` (the long lists),
    ``talaria`` (Talaria's own, after the lists; hermes-webui drops keys it does not know and each has a safe
    meaning when absent), ``derived`` (computed at save, written ahead of ``messages``) or ``row`` (computed
    for the index row only). ``kind``: how a value read from a file is normalised (``NORMALISE``); ``given``
    for the few ``Session.__init__`` fills from the settings or the clock. ``index``: whether the index row
    (``Session.compact()``, hermes-webui's ``_index.json`` row) carries it: ``always``, ``if_set``, or with its
    group (``worktree``: when ``worktree_path`` is set; ``recovery``: when either recovery field is).
    ``sidebar``: whether the sidebar list sends it (``always`` or ``if_set``).
    """

    name: str
    kind: str
    place: str = "metadata"
    index: str = ""
    sidebar: str = ""


# The file's order: metadata, the lists, Talaria's own; then the keys derived from them.
FIELDS: tuple[Field, ...] = (
    Field("session_id", "given", index="always", sidebar="always"),
    Field("title", "title", index="always", sidebar="always"),
    Field("workspace", "given", index="always", sidebar="always"),
    Field("created_workspace", "given", index="always"),
    Field("model", "given", index="always", sidebar="always"),
    Field("model_provider", "lower_text_or_none", index="always", sidebar="always"),
    Field("model_explicit_pick_signature", "or_none"),
    Field("created_at", "given", index="always", sidebar="always"),
    Field("updated_at", "given", index="always", sidebar="always"),
    Field("pinned", "bool", index="always", sidebar="always"),
    Field("archived", "bool", index="always", sidebar="always"),
    Field("project_id", "or_none", index="always", sidebar="always"),
    Field("profile", "as_is", index="always", sidebar="always"),
    Field("input_tokens", "zero", index="always"),
    Field("output_tokens", "zero", index="always"),
    Field("estimated_cost", "as_is", index="always"),
    Field("cache_read_tokens", "zero", index="always"),
    Field("cache_write_tokens", "zero", index="always"),
    Field("personality", "as_is", index="always"),
    Field("active_stream_id", "as_is", index="always", sidebar="always"),
    Field("pending_user_message", "as_is", index="always"),
    Field("pending_attachments", "list"),
    Field("pending_started_at", "as_is"),
    Field("pending_user_source", "as_is"),
    Field("compression_anchor_visible_idx", "as_is", index="always"),
    Field("compression_anchor_message_key", "as_is", index="always"),
    Field("compression_anchor_summary", "as_is", index="always"),
    Field("pre_compression_snapshot", "bool", index="always"),
    Field("context_engine", "as_is", index="always"),
    Field("compression_anchor_engine", "as_is", index="always"),
    Field("compression_anchor_mode", "as_is", index="always"),
    Field("compression_anchor_details", "dict", index="always"),
    Field("context_engine_state", "dict", index="always"),
    Field("context_length", "as_is", index="always"),
    Field("threshold_tokens", "as_is", index="always"),
    Field("last_prompt_tokens", "as_is", index="always"),
    Field("post_compression_context_tokens_estimate", "positive_int_or_none", index="always"),
    Field("compression_recovery", "dict", index="always"),
    Field("recommended_recovery_action", "as_is", index="always"),
    Field("compression_recovery_source_session_id", "stripped_text_or_none", index="recovery"),
    Field("compression_recovery_action", "stripped_text_or_none", index="recovery"),
    Field("truncation_watermark", "float_or_none"),
    Field("truncation_boundary", "float_or_none"),
    Field("clear_generation", "text_or_none"),
    Field("intentional_shrink_generation", "text_or_none"),
    Field("gateway_routing", "dict_or_none", index="always"),
    Field("gateway_routing_history", "list", index="always"),
    Field("llm_title_generated", "bool"),
    Field("manual_title", "bool", index="always"),
    Field("parent_session_id", "as_is", index="if_set", sidebar="if_set"),
    Field("worktree_path", "path_or_none", index="worktree"),
    Field("worktree_branch", "str_or_none", index="worktree"),
    Field("worktree_repo_root", "path_or_none", index="worktree"),
    Field("worktree_created_at", "as_is", index="worktree"),
    Field("is_cli_session", "bool", index="always"),
    Field("source_tag", "as_is", index="always"),
    Field("raw_source", "as_is", index="always"),
    Field("session_source", "as_is", index="always"),
    Field("source_label", "as_is", index="always"),
    Field("read_only", "bool", index="always"),
    Field("enabled_toolsets", "as_is", index="always"),
    Field("composer_draft", "dict", index="always"),
    Field("process_wakeup_pause", "dict", index="always"),
    Field("share_token", "stripped_text_or_none", index="always"),
    Field("share_created_at", "as_is", index="always"),
    Field("agent_session_id", "session_id_or_none", index="always", sidebar="if_set"),
    Field("messages", "list", "bulk"),
    Field("tool_calls", "list", "bulk"),
    Field("anchor_activity_scenes", "dict", "bulk"),
    Field("context_messages", "list", "talaria"),
    Field("compression_generation", "given", "talaria"),
    Field("compression_undo", "dict_or_none", "talaria"),
    Field("pending_question", "dict_or_none", "talaria"),  # an approval or clarify question a turn waits on
    Field("reasoning_effort", "text_or_none", "talaria"),  # None follows the agent's config
    Field("environment", "text_or_none", "talaria", index="if_set"),  # where its tools run; None is local
    Field("environment_workspace", "text_or_none", "talaria"),  # its folder on that environment's side
    Field("message_versions", "version_groups", "talaria"),  # api/rules/version_rules.py; None: no versions
    Field("queued_messages", "queue_items", "talaria"),  # sent while a turn ran, to run after it in order
    Field("message_count", "count_or_none", "derived", index="always", sidebar="always"),
    Field("anchor_scene_index", "dict_or_none", "derived"),
    Field("user_message_count", "count_or_none", "derived", index="always"),
    Field("last_message_at", "float_or_none", "derived", index="always", sidebar="always"),
    Field("queued_count", "count_or_none", "derived", index="always"),  # written only when not 0
    Field("cache_hit_percent", "given", "row", index="always"),
    Field("visible_message_count", "given", "row", index="always", sidebar="always"),
    Field("has_pending_user_message", "given", "row", index="always"),
    Field("is_streaming", "given", "row", index="always", sidebar="always"),
)


def _names(place: str) -> tuple[str, ...]:
    return tuple(f.name for f in FIELDS if f.place == place)


METADATA_FIELDS: tuple[str, ...] = _names("metadata")
BULK_FIELDS: tuple[str, ...] = _names("bulk")
TALARIA_FIELDS: tuple[str, ...] = _names("talaria")
# Computed at save and written ahead of "messages", so a prefix read gives the whole sidebar row.
DERIVED_KEYS: frozenset[str] = frozenset(_names("derived"))
KNOWN_FIELDS: frozenset[str] = frozenset(METADATA_FIELDS) | frozenset(BULK_FIELDS) | frozenset(TALARIA_FIELDS)
# The fields a session's index row copies from it (the rest of the row is computed: ``api.store.session_rows``).
INDEX_COPIED: tuple[Field, ...] = tuple(f for f in FIELDS if f.index and f.place not in ("derived", "row"))
SIDEBAR_FIELDS: tuple[str, ...] = tuple(f.name for f in FIELDS if f.sidebar == "always")
SIDEBAR_IF_SET: tuple[str, ...] = tuple(f.name for f in FIELDS if f.sidebar == "if_set")


class SessionFields:
    """The stored fields of the table, declared with the type a loaded session holds (``Any`` where a file's
    value is kept as it is). ``api.store.models.Session`` inherits them, so tools see its attributes; a test checks
    that these name exactly the stored fields and that each declared type is the one its kind gives."""

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
    agent_session_id: str | None  # the agent's session (state.db) this one continues, if imported
    messages: list[Any]
    tool_calls: list[Any]
    anchor_activity_scenes: dict[str, Any]
    context_messages: list[Any]
    compression_generation: str | None
    compression_undo: dict[str, Any] | None
    pending_question: dict[str, Any] | None
    reasoning_effort: str | None
    environment: str | None
    environment_workspace: str | None
    message_versions: list[dict[str, Any]] | None
    queued_messages: list[dict[str, Any]]  # messages waiting for the live turn to end (api.rules.queue_items)


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


def positive_int_or_none(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    try:
        out = int(value)
    except (TypeError, ValueError):
        return None
    return out if out > 0 else None


def count_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _number_or_zero(value: Any) -> Any:
    # A count kept as the file had it when it is a number (hermes-webui writes ints), else 0.
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else 0


# Each kind: the normaliser, and the type a session holds (what ``SessionFields`` declares for it).
NORMALISE: dict[str, tuple[Callable[[Any], Any], Any]] = {
    "as_is": (lambda value: value, Any),
    "bool": (bool, bool),
    "zero": (_number_or_zero, Any),
    "dict": (lambda value: value if isinstance(value, dict) else {}, dict[str, Any]),
    "list": (lambda value: value if isinstance(value, list) else [], list[Any]),
    "dict_or_none": (lambda value: value if isinstance(value, dict) else None, dict[str, Any] | None),
    "or_none": (lambda value: value or None, Any),
    "title": (lambda value: value or "Untitled", Any),
    "text_or_none": (lambda value: value if isinstance(value, str) and value else None, str | None),
    "str_or_none": (lambda value: str(value) if value else None, str | None),
    "stripped_text_or_none": (lambda value: str(value).strip() if value else None, str | None),
    "lower_text_or_none": (lambda value: str(value).strip().lower() if value else None, str | None),
    "float_or_none": (float_or_none, float | None),
    "path_or_none": (lambda value: resolve_path_str(value) if value else None, str | None),
    "positive_int_or_none": (positive_int_or_none, int | None),
    "count_or_none": (count_or_none, int | None),
    "session_id_or_none": (lambda value: value if is_safe_session_id(value) else None, str | None),
    "queue_items": (queue_items.valid_items, list[dict[str, Any]]),
    "version_groups": (lambda value: version_rules.groups_of(value) or None, list[dict[str, Any]] | None),
}
# What ``Session.__init__`` applies to each stored field it does not fill itself (kind ``given``).
NORMALISERS: tuple[tuple[str, Callable[[Any], Any]], ...] = tuple(
    (f.name, NORMALISE[f.kind][0]) for f in FIELDS if f.name in KNOWN_FIELDS and f.kind != "given"
)


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

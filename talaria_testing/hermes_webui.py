"""TEST DOUBLE of hermes-webui's session store: how it loads, turns and saves a session file.

hermes-webui cannot run here, so this stands in for it in the round-trip tests (switching to hermes-webui
and back over the same folder). It is written from hermes-webui's documented behaviour, not from
Talaria's code, and does only what those tests need:

- its ``Session`` knows a fixed set of fields and silently drops every other key of the file;
- dict-valued fields it keeps only when they hold a dict, ``context_messages`` only when a list;
- ``save()`` writes the metadata fields in its order, then ``message_count`` and ``anchor_scene_index``,
  then ``messages``, ``tool_calls``, ``anchor_activity_scenes``, and ``context_messages`` last
  (``indent=2``, not ASCII-escaped), through a temp file and a rename;
- a turn appends the user row and the answer (both with ``_ts`` and ``timestamp``) to ``messages`` and,
  when it is not empty, to ``context_messages``; clears the pending fields; advances a truthy
  ``truncation_watermark`` to the new user row's time;
- a session with a ``parent_session_id`` is read as a compression continuation of its parent (whose rows
  it shows before its own) unless its ``session_source`` is ``"fork"``.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

METADATA_FIELDS = (
    "session_id", "title", "workspace", "created_workspace", "model", "model_provider",
    "model_explicit_pick_signature", "created_at", "updated_at", "pinned", "archived", "project_id",
    "profile", "input_tokens", "output_tokens", "estimated_cost", "cache_read_tokens", "cache_write_tokens",
    "personality", "active_stream_id", "pending_user_message", "pending_attachments", "pending_started_at",
    "pending_user_source", "compression_anchor_visible_idx", "compression_anchor_message_key",
    "compression_anchor_summary", "pre_compression_snapshot", "context_engine", "compression_anchor_engine",
    "compression_anchor_mode", "compression_anchor_details", "context_engine_state", "context_length",
    "threshold_tokens", "last_prompt_tokens", "post_compression_context_tokens_estimate",
    "compression_recovery", "recommended_recovery_action", "compression_recovery_source_session_id",
    "compression_recovery_action", "truncation_watermark", "truncation_boundary", "clear_generation",
    "intentional_shrink_generation", "gateway_routing", "gateway_routing_history", "llm_title_generated",
    "manual_title", "parent_session_id", "worktree_path", "worktree_branch", "worktree_repo_root",
    "worktree_created_at", "is_cli_session", "source_tag", "raw_source", "session_source", "source_label",
    "read_only", "enabled_toolsets", "composer_draft", "process_wakeup_pause", "share_token",
    "share_created_at",
)  # fmt: skip
DICT_FIELDS = frozenset(
    {
        "compression_anchor_details", "context_engine_state", "compression_recovery", "composer_draft",
        "anchor_activity_scenes", "process_wakeup_pause",
    }
)  # fmt: skip
BULK_FIELDS = ("messages", "tool_calls", "anchor_activity_scenes")


def load(path: Path) -> dict:
    """The session as hermes-webui's ``Session(**data)`` holds it: known fields only, normalised."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    held: dict[str, Any] = {}
    for name in (*METADATA_FIELDS, *BULK_FIELDS):
        value = data.get(name)
        if name in DICT_FIELDS:
            value = value if isinstance(value, dict) else {}
        elif name in ("messages", "tool_calls", "pending_attachments", "gateway_routing_history"):
            value = value or []
        held[name] = value
    context = data.get("context_messages")
    held["context_messages"] = context if isinstance(context, list) else []
    return held


def save(path: Path, session: dict) -> None:
    """Write ``session`` the way hermes-webui's ``Session.save()`` does (temp file, fsync, rename)."""
    payload = {name: session.get(name) for name in METADATA_FIELDS}
    payload["message_count"] = len(session["messages"])
    scenes = session.get("anchor_activity_scenes") or {}
    payload["anchor_scene_index"] = {k: (v or {}).get("updated_at") for k, v in scenes.items()}
    for name in BULK_FIELDS:
        payload[name] = session.get(name)
    payload["context_messages"] = session.get("context_messages") or []
    tmp = Path(path).with_suffix(f".tmp.{os.getpid()}")
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(payload, fh, indent=2, ensure_ascii=False)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def run_turn(path: Path, user_text: str, answer: str) -> dict:
    """One hermes-webui turn in the session file at ``path``: load, append the exchange, save."""
    session = load(path)
    now = time.time()
    user = {"role": "user", "content": user_text, "timestamp": now, "_ts": now}
    reply = {"role": "assistant", "content": answer, "timestamp": now + 0.001, "_ts": now + 0.001}
    session["messages"] = [*session["messages"], user, reply]
    if session["context_messages"]:
        session["context_messages"] = [*session["context_messages"], dict(user), dict(reply)]
    for name in ("active_stream_id", "pending_user_message", "pending_started_at", "pending_user_source"):
        session[name] = None
    session["pending_attachments"] = []
    if session.get("truncation_watermark"):
        session["truncation_watermark"] = now
    session["updated_at"] = now
    save(path, session)
    return session


def reads_as_continuation(doc: dict) -> bool:
    """hermes-webui shows a session with a parent as the continuation of a compression unless it is a fork."""
    return bool(doc.get("parent_session_id")) and doc.get("session_source") != "fork"

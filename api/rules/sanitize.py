"""The model-facing projection of a transcript: only the keys and rows a provider may be sent.

``scrub_surrogates`` is the other rule for text entering Talaria (typed, imported or written by the
model): a lone UTF-16 surrogate cannot be encoded as UTF-8, so it becomes U+FFFD before anything stores
or streams it.

A user row that the model never answered (its turn failed, or was stopped or killed before any output)
stays in the transcript but is left out here: sent again, it would sit right before the next user row and
the agent would glue the two into one message. docs/turns.md lists which rows reach the model after each
way a turn can end.
"""

from __future__ import annotations

import copy
import re
from typing import Any

from api.rules.message_keys import is_context_compression_marker

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")

API_KEYS = ("role", "content", "tool_calls", "tool_call_id", "name", "refusal", "reasoning_content")


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            p.get("text", "") for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)
        )
    return ""


def _only_thinking_parts(content: Any) -> bool:
    return (
        isinstance(content, list)
        and bool(content)
        and all(
            isinstance(p, dict) and p.get("type") in ("thinking", "reasoning", "redacted_thinking")
            for p in content
        )
    )


def _is_reasoning_only(msg: dict[str, Any]) -> bool:
    if msg.get("role") != "assistant" or msg.get("tool_calls"):
        return False
    if _text_of(msg.get("content")).strip():
        return False
    return bool(
        msg.get("reasoning") or msg.get("reasoning_content") or _only_thinking_parts(msg.get("content"))
    )


def _call_ids(msg: dict[str, Any]) -> list[str]:
    calls = msg.get("tool_calls")
    if not isinstance(calls, list):
        return []
    return [c["id"] for c in calls if isinstance(c, dict) and isinstance(c.get("id"), str)]


def sanitize_messages_for_api(messages: list[Any]) -> list[dict[str, Any]]:
    """A deep-copied list of provider-safe rows (docs/session-model.md, "Compression")."""
    rows = [m for m in messages if isinstance(m, dict) and isinstance(m.get("role"), str) and m.get("role")]
    rows = [m for m in rows if not m.get("_error")]
    rows = [
        m
        for m in rows
        if not (m.get("_partial") and not _text_of(m.get("content")).strip() and not m.get("tool_calls"))
    ]
    rows = [m for m in rows if not _is_reasoning_only(m)]
    rows = _drop_stray_recovered_users(rows)

    declared: set[str] = set()
    answered: set[str] = set()
    for m in rows:
        if m["role"] == "assistant":
            declared.update(_call_ids(m))
        elif m["role"] == "tool" and isinstance(m.get("tool_call_id"), str):
            answered.add(m["tool_call_id"])

    out: list[dict[str, Any]] = []
    for m in rows:
        if m["role"] == "tool" and m.get("tool_call_id") not in declared:
            continue
        clean = {k: copy.deepcopy(m[k]) for k in API_KEYS if k in m}
        if clean["role"] == "assistant" and "tool_calls" in clean:
            calls = clean["tool_calls"]
            kept = (
                [c for c in calls if isinstance(c, dict) and c.get("id") in answered]
                if isinstance(calls, list)
                else []
            )
            if kept:
                clean["tool_calls"] = kept
            else:
                del clean["tool_calls"]
                if not _text_of(clean.get("content")).strip():
                    continue
        out.append(clean)
    return _drop_unanswered_users(out)


def _drop_unanswered_users(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Drop each user row followed by another user row or by nothing (a compaction summary stays)."""
    kept = []
    for i, m in enumerate(rows):
        unanswered = m["role"] == "user" and (i + 1 == len(rows) or rows[i + 1]["role"] == "user")
        if unanswered and not is_context_compression_marker(m):
            continue
        kept.append(m)
    return kept


def _drop_stray_recovered_users(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Keep a ``_recovered`` user row only where it separates two assistant rows."""
    out = []
    for i, m in enumerate(rows):
        if m.get("role") == "user" and m.get("_recovered"):
            prev_role = rows[i - 1].get("role") if i > 0 else None
            next_role = rows[i + 1].get("role") if i + 1 < len(rows) else None
            if not (prev_role == "assistant" and next_role == "assistant"):
                continue
        out.append(m)
    return out


def scrub_surrogates(value: Any) -> Any:
    """``value`` with every lone surrogate in its strings (keys too) replaced by U+FFFD.

    Returns the same object when there is none, so clean text costs one UTF-8 encode per string.
    """
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return _LONE_SURROGATE.sub("\ufffd", value)
        return value
    if isinstance(value, dict):
        items = [(scrub_surrogates(k), scrub_surrogates(v)) for k, v in value.items()]
        if all(k is k0 and v is v0 for (k, v), (k0, v0) in zip(items, value.items(), strict=True)):
            return value
        return dict(items)
    if isinstance(value, list):
        scrubbed = [scrub_surrogates(v) for v in value]
        return value if all(a is b for a, b in zip(scrubbed, value, strict=True)) else scrubbed
    return value

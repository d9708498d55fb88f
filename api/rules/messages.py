"""The message vocabulary: how a message row's times and text are read.

A message row carries up to two times: ``timestamp`` (what the agent stores in state.db) and ``_ts``
(what hermes-webui stamps on the rows it writes). Each reader below is named for the rule it follows;
docs/session-model.md ("Message times") says which caller uses which. Pure functions, no I/O.
"""

from __future__ import annotations

import math
from typing import Any


def parse_timestamp(value: Any) -> float | None:
    """A finite float, or ``None`` for missing, empty, boolean, non-numeric or non-finite values."""
    if type(value) is float:
        return value if math.isfinite(value) else None
    if value is None or value == "" or isinstance(value, bool):
        return None
    try:
        out = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return out if math.isfinite(out) else None


def merge_timestamp(msg: Any) -> float | None:
    """The time reconciliation compares: ``timestamp`` only, the one time state.db rows have."""
    return parse_timestamp(msg.get("timestamp")) if isinstance(msg, dict) else None


def message_time(msg: Any) -> float | None:
    """When the message was written, as hermes-webui reads it: ``_ts`` first, then ``timestamp``.

    The sidebar's ``last_message_at`` and anything shown to a person use this rule.
    """
    if not isinstance(msg, dict):
        return None
    ts = parse_timestamp(msg.get("_ts"))
    return ts if ts is not None else parse_timestamp(msg.get("timestamp"))


def timestamp_or_ts(msg: Any) -> float | None:
    """``timestamp`` first (the time the merge compares), then ``_ts`` for rows written without one.

    Truncation watermarks and the compression anchor's lookup in state.db use this rule.
    """
    ts = merge_timestamp(msg)
    if ts is not None or not isinstance(msg, dict):
        return ts
    return parse_timestamp(msg.get("_ts"))


def content_as_text(content: Any) -> str:
    """Content as the message keys compare it: a string as is, ``""`` for none, else its ``str()``."""
    if type(content) is str:
        return content
    return "" if content is None else str(content)


def message_text(msg: Any) -> str:
    """The words of a message: string content, or its text parts (and bare strings) joined by newlines."""
    if not isinstance(msg, dict):
        return ""
    content = msg.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                parts.append(part["text"])
            elif isinstance(part, str):
                parts.append(part)
        return "\n".join(parts)
    return ""


_ANSWER_ROLES = frozenset({"assistant", "tool"})


def visible_message_count(messages: list[Any]) -> int:
    """How many messages a person sees in the transcript: each user (or system) row, and each answer — a
    run of assistant rows and the tool results between them reads as one message (the page folds the
    results into the calls' cards and shows the run under one heading)."""
    count = 0
    previous = None
    for msg in messages:
        role = msg.get("role") if isinstance(msg, dict) else None
        role = role if isinstance(role, str) else None  # a corrupt row counts as its own message
        if role not in _ANSWER_ROLES or previous not in _ANSWER_ROLES:
            count += 1
        previous = role
    return count

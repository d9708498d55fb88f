"""The compression anchor: which transcript row a compression follows (docs/session-model.md,
"Compression"). Pure rules over message rows; ``api.services.compression`` sets the anchor, the session view sends
its index to the page.
"""

from __future__ import annotations

import math
import re
from typing import Any

from api.rules.message_keys import is_context_compression_marker
from api.rules.messages import parse_timestamp

_WS = re.compile(r"\s+")


def _collapse(text: str) -> str:
    return _WS.sub(" ", text).strip()


def _anchor_text(msg: dict[str, Any]) -> str:
    content = msg.get("content")
    if isinstance(content, str):
        return _collapse(content)
    if isinstance(content, list):
        parts = [
            p.get("text", "") for p in content if isinstance(p, dict) and p.get("type", "text") == "text"
        ]
        return _collapse(" ".join(p for p in parts if isinstance(p, str)))
    return ""


def visible_messages_for_anchor(messages: list[Any], auto_compression: bool = False) -> list[dict[str, Any]]:
    """Rows a person sees as turns (docs/session-model.md, "Compression")."""
    out = []
    for m in messages:
        if not isinstance(m, dict) or not m.get("role") or m.get("role") == "tool":
            continue
        if is_context_compression_marker(m):
            continue
        attachments = m.get("attachments")
        has_attachments = isinstance(attachments, list) and bool(attachments)
        text = _anchor_text(m)
        if m["role"] in ("user", "system"):
            if text or has_attachments:
                out.append(m)
        elif m["role"] == "assistant":
            content = m.get("content")
            tool_use = isinstance(content, list) and any(
                isinstance(p, dict) and p.get("type") == "tool_use" for p in content
            )
            if text or has_attachments or m.get("tool_calls") or tool_use or m.get("reasoning"):
                out.append(m)
        elif text:
            out.append(m)
    return out


def anchor_message_key(msg: dict[str, Any]) -> dict[str, Any] | None:
    """The key that finds the anchor's row again: role, ``_ts`` (else ``timestamp``), text, attachments."""
    attachments = msg.get("attachments")
    count = len(attachments) if isinstance(attachments, list) else 0
    ts = msg.get("_ts") if msg.get("_ts") is not None else msg.get("timestamp")
    text = _anchor_text(msg)[:160]
    if not text and not count and ts is None:
        return None
    return {"role": msg.get("role"), "ts": ts, "text": text, "attachments": count}


def _same_time(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a is None and b is None
    x, y = parse_timestamp(a), parse_timestamp(b)
    return x is not None and y is not None and math.isclose(x, y, rel_tol=0.0, abs_tol=1e-6)


def anchor_message_index(
    messages: list[Any], key: Any, visible_idx: Any, recorded_idx: Any = None
) -> int | None:
    """Where in ``messages`` the compression marker goes: after the row at the returned index.

    The index recorded at compression time wins while it is in range; else the last row whose anchor key
    equals ``key`` (hermes-webui's sessions carry no recorded index); else, without a key, the row that
    is the ``visible_idx``-th row a person sees. None when the session has no anchor or its row is gone.
    """
    if key and type(recorded_idx) is int and 0 <= recorded_idx < len(messages):
        return recorded_idx
    if isinstance(key, dict):
        for i in range(len(messages) - 1, -1, -1):
            found = anchor_message_key(messages[i]) if isinstance(messages[i], dict) else None
            if (
                found is not None
                and found["role"] == key.get("role")
                and found["text"] == key.get("text")
                and _same_time(found["ts"], key.get("ts"))
            ):
                return i
        return None
    if type(visible_idx) is not int or visible_idx < 0:
        return None
    visible = visible_messages_for_anchor(messages)
    if visible_idx >= len(visible):
        return None
    target = visible[visible_idx]
    return next((i for i, m in enumerate(messages) if m is target), None)

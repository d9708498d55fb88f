"""Transcripts that tests and benchmarks build: rows, short conversations, long Markdown-rich sessions."""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any


def message_row(role: str, content: Any, ts: float | None, **extra: Any) -> dict:
    """One transcript row as a session file holds it."""
    return {"role": role, "content": content, "timestamp": ts, **extra}


def conversation(*texts: str, start: float = 1.0) -> list[dict]:
    """User and assistant rows in turn with these texts, one second apart from ``start``."""
    return [
        message_row("user" if i % 2 == 0 else "assistant", text, start + i) for i, text in enumerate(texts)
    ]


def session_view(**fields: Any) -> SimpleNamespace:
    """The fields of a session that the reconciliation reads, as a plain object: by default an empty web
    session, never compressed or edited; ``fields`` override."""
    base: dict[str, Any] = {
        "session_id": "s1",
        "messages": [],
        "context_messages": [],
        "truncation_watermark": None,
        "truncation_boundary": None,
        "compression_anchor_message_key": None,
        "is_cli_session": False,
        "read_only": False,
        "profile": None,
    }
    return SimpleNamespace(**{**base, **fields})


def long_transcript(count: int) -> list[dict]:
    """``count`` alternating user and assistant rows a day old, each answer with a code block and a list."""
    base = time.time() - 86400
    out = []
    for i in range(count):
        if i % 2 == 0:
            out.append(
                {"role": "user", "content": f"Question {i}: what about item {i}?", "timestamp": base + i}
            )
        else:
            text = f"Answer {i}: item {i - 1} is fine.\n\n```python\nprint({i})\n```\n\n- one\n- two"
            out.append({"role": "assistant", "content": text, "timestamp": base + i})
    return out

"""Transcripts that tests and benchmarks build: long, Markdown-rich sessions of known shape."""

from __future__ import annotations

import time


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

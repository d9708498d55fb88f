"""Where a model context sits in state.db (session-core.md §3.4, §3.5): pure, no I/O.

``state_db_delta_after_context`` finds the state rows newer than a context that state.db may mirror;
``_state_db_anchor_index`` finds the state row a compaction anchor key names. ``api.reconcile``
combines them with the append-only merge into the reconciled view and re-exports the public name.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from api.merge_index import _raw_prefix
from api.message_keys import (
    Rows,
    collapse,
    reconcile_api_content_sidecars,
)
from api.messages import parse_timestamp, timestamp_or_ts

_CONTENT_COLUMNS = frozenset({"tool_call_id", "tool_name", "name", "api_content"})


def state_db_delta_after_context(context: list | None, state: list | None) -> list:
    """The state rows newer than a context that state.db may mirror (§3.4); all of them when unaligned."""
    context = list(context or [])
    state = list(state or [])
    if not context or not state:
        return state
    reconcile_api_content_sidecars(context, state)
    t = Rows(context, state)
    nc, ns = len(context), len(state)
    best, best_o = 0, 0
    for o in range(nc):
        if best >= nc - o:
            break
        limit = min(nc - o, ns)
        if not t.same_content(nc, o):
            continue
        run = 1
        found = _raw_prefix(state[:limit], context[o : o + limit], _CONTENT_COLUMNS)
        if found is not None:  # rows the columns prove equal, then row by row from the first doubt
            length, closer, _ = found
            run = next((k for k in sorted(closer) if not t.same_content(nc + k, o + k)), length)
        while run < limit and t.same_content(nc + run, o + run):
            run += 1
        if run > best:
            best, best_o = run, o
    first = context[0]
    recovered_head = isinstance(first, dict) and first.get("role") == "user" and bool(first.get("_recovered"))
    if best < 2 and not (best == 1 and best_o == 0 and recovered_head):
        return state
    ci = best  # the context cursor restarts at the run length whatever the offset (reference behaviour)
    if ci >= nc:
        return state[best:]
    for si in range(best, ns):
        if t.same_content(nc + si, ci):
            ci += 1
            if ci >= nc:
                return state[si + 1 :]
    return state[best:]


def _anchor_ts(value: Any) -> float | None:
    parsed = parse_timestamp(value)
    if parsed is not None or not isinstance(value, str):
        return parsed
    try:
        moment = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()


def _anchor_text(msg: dict) -> str:
    content = msg.get("content")
    if isinstance(content, list):
        text = " ".join(p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    else:
        text = content if isinstance(content, str) else ""
    return collapse(text)[:160]


def _state_db_anchor_index(state: list, anchor: Any) -> int | None:
    """Index of the last state row matching the compression anchor key (role, text, attachments, ts)."""
    if not isinstance(anchor, dict) or not anchor.get("role"):
        return None
    anchor_ts = _anchor_ts(anchor.get("ts"))
    if anchor_ts is None:
        return None
    text = anchor.get("text")
    anchor_text = collapse(text)[:160] if isinstance(text, str) else ""
    try:
        anchor_attachments = int(anchor.get("attachments") or 0)
    except (TypeError, ValueError):
        anchor_attachments = 0
    found = None
    for i, row in enumerate(state):
        if not isinstance(row, dict) or row.get("role") != anchor["role"]:
            continue
        attachments = row.get("attachments")
        if (len(attachments) if isinstance(attachments, list) else 0) != anchor_attachments:
            continue
        if anchor_text and _anchor_text(row) != anchor_text:
            continue
        row_ts = timestamp_or_ts(row)
        if row_ts is not None and abs(row_ts - anchor_ts) <= 1e-6:
            found = i
    return found

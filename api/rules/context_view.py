"""Where a model context sits in state.db (docs/reconciliation.md, "The context delta"): pure, no I/O.

``state_db_delta_after_context`` finds the state rows newer than a context that state.db may mirror;
``state_db_anchor_index`` finds the state row a compaction anchor key names. ``api.rules.reconcile``
combines them with the append-only merge into the reconciled view and re-exports the public name.
"""

from __future__ import annotations

from datetime import UTC, datetime
from itertools import compress, repeat
from operator import eq
from typing import Any

from api.rules.merge_index import raw_prefix
from api.rules.message_keys import (
    UNTAGGED_TEXTS,
    collapse,
    reconcile_api_content_sidecars,
)
from api.rules.messages import parse_timestamp, timestamp_or_ts
from api.rules.row_facts import Rows

_CONTENT_COLUMNS = frozenset({"tool_call_id", "tool_name", "name", "api_content"})


def state_db_delta_after_context(context: list[Any] | None, state: list[Any] | None) -> list[Any]:
    """The state rows newer than a context that state.db may mirror; all of them when unaligned."""
    context = list(context or [])
    state = list(state or [])
    if not context or not state:
        return state
    reconcile_api_content_sidecars(context, state)
    facts = Rows(context, state)
    context_len, state_len = len(context), len(state)
    best, best_offset = 0, 0
    for offset in range(context_len):
        if best >= context_len - offset:
            break
        limit = min(context_len - offset, state_len)
        if not facts.same_content(context_len, offset):
            continue
        run = _run_length(facts, offset, limit)
        if run > best:
            best, best_offset = run, offset
    first = context[0]
    recovered_head = isinstance(first, dict) and first.get("role") == "user" and bool(first.get("_recovered"))
    if best < 2 and not (best == 1 and best_offset == 0 and recovered_head):
        return state
    # The context cursor restarts at the run length whatever the offset, as hermes-webui's does.
    context_cursor = best
    if context_cursor >= context_len:
        return state[best:]
    for state_index in range(best, state_len):
        if facts.same_content(context_len + state_index, context_cursor):
            context_cursor += 1
            if context_cursor >= context_len:
                return state[state_index + 1 :]
    return state[best:]


def _run_length(facts: Rows, offset: int, limit: int) -> int:
    """How many leading state rows (at most ``limit``) have the content keys of the context rows from
    ``offset`` on. The first pair is known to match.

    A state row equal as a dict to its context row has its content key, unless its text is not a plain
    string or may open with a workspace tag (the state side drops it): only the other rows are compared
    one by one. When many rows differ as dicts (rows with extra fields), the columns decide instead.
    """
    context_len = facts.transcript_len
    state = facts.rows[context_len : context_len + limit]
    context = facts.rows[offset : offset + limit]
    equal = list(map(eq, state, context))
    try:
        contents = list(map(dict.get, state, repeat("content")))
        doubtful = UNTAGGED_TEXTS.failing(contents)
    except TypeError:  # a non-dict row or list content
        return _run_by_columns(facts, offset, limit)
    if equal.count(False) > limit // 8 + 8:
        return _run_by_columns(facts, offset, limit)
    closer: list[int] = []
    k = -1
    try:  # list.index finds the next unequal row at C speed
        while True:
            k = equal.index(False, k + 1)
            closer.append(k)
    except ValueError:
        pass
    if doubtful:
        closer = sorted({*closer, *compress(range(limit), map(doubtful.__contains__, contents))})
    return next((k for k in closer if not facts.same_content(context_len + k, offset + k)), limit)


def _run_by_columns(facts: Rows, offset: int, limit: int) -> int:
    """``_run_length`` from the content and role columns, then row by row from the first doubt."""
    context_len = facts.transcript_len
    state = facts.rows[context_len : context_len + limit]
    run = 1
    found = raw_prefix(state, facts.rows[offset : offset + limit], _CONTENT_COLUMNS)
    if found is not None:  # rows the columns prove equal, then row by row from the first doubt
        length, closer, _ = found
        run = next((k for k in sorted(closer) if not facts.same_content(context_len + k, offset + k)), length)
    while run < limit and facts.same_content(context_len + run, offset + run):
        run += 1
    return run


def _anchor_ts(value: Any) -> float | None:
    parsed = parse_timestamp(value)
    if parsed is not None or not isinstance(value, str):
        return parsed
    try:
        moment = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()


def _anchor_text(msg: dict[str, Any]) -> str:
    content = msg.get("content")
    if isinstance(content, list):
        text = " ".join(p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    else:
        text = content if isinstance(content, str) else ""
    return collapse(text)[:160]


def state_db_anchor_index(state: list[Any], anchor: Any) -> int | None:
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

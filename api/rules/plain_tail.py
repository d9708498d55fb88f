"""The rows a new turn adds (docs/reconciliation.md, "Speed"): the one-pass append of rows no rule but the
last can take, and the shortcut of the reconciled model context when state.db holds the context row for
row followed by such rows, the usual state of a session between two turns.

Both decide from raw fields and the transcript's text index, without building the rows' keys, and
give up (the rules decide) whenever that cannot settle it. Pure: rows come in as arguments.
"""

from __future__ import annotations

from collections.abc import Callable, Container
from itertools import compress, repeat
from operator import eq, not_
from typing import Any

from api.rules.merge_index import TranscriptTexts, transcript_texts
from api.rules.merge_state import FUZZY_MAX_CHARS, fuzzy_settled
from api.rules.message_keys import (
    PLAIN_UNTAGGED_TEXTS,
    ROW_ID_ALIASES,
    api_content,
    collapse,
    strip_workspace_tag,
    tokens,
)
from api.rules.messages import content_as_text, parse_timestamp
from api.rules.row_facts import Rows, newest_time, same_raw_content

_INF = float("inf")
_IDENTITY_KEYS = frozenset({"id", "message_id", *ROW_ID_ALIASES})


def count_plainly_new(
    rows: list[Any],
    start: int,
    *,
    newest: float | None,
    texts: TranscriptTexts | None,
    transcript: list[Any],
    replay_order: range | list[int],
    fuzzy_allowed: Callable[[], bool],
    matched_times: Container[float | None] = (),
    registered: Callable[[], Container[Any]] | None = None,
    registered_first: bool = False,
) -> int:
    """How many of ``rows`` from ``start`` on no rule but the last (append) can take, with no watermark.

    Such a row has no identity field, a time newer than ``newest`` (every transcript row's: no transcript
    row shares its exact or merge key) and than no matched state row's (``matched_times``), a text no row
    registered before (``registered()``, asked from the first row when ``registered_first``, else once a
    row was taken) or taken in this run has, and no unreplayed transcript row exactly or fuzzily like it
    (``texts``: the text index of ``transcript``'s rows in ``replay_order``, ``None`` when the replay has
    consumed them). The screenshot mirror takes only rows exactly as old as a transcript row, never such a
    row; a user row with parts after the first ends the run all the same.
    """
    known: Container[Any] | None = None
    taken: set[str] = set()
    norms = collapse.cache
    handle, end = start, len(rows)
    while handle < end:
        row = rows[handle]
        if type(row) is not dict or not row.keys().isdisjoint(_IDENTITY_KEYS):
            break
        content = row.get("content")
        if handle > start and type(content) is list and row.get("role") == "user":
            break
        ts = row.get("timestamp")
        if type(ts) is not float or not -_INF < ts < _INF:
            ts = parse_timestamp(ts)
        if ts is None or (newest is not None and ts <= newest) or ts in matched_times:
            break
        raw = content if type(content) is str else content_as_text(content)
        if registered is not None and (taken or registered_first):
            if known is None:
                known = registered()
            if raw in known:
                break
        if raw in taken:
            break
        text = strip_workspace_tag(raw) if row.get("role") == "user" else raw
        norm = norms.get(text)
        if texts is not None and not _unlike_transcript(
            row, collapse(text) if norm is None else norm, texts, transcript, replay_order, fuzzy_allowed
        ):
            break
        taken.add(raw)
        handle += 1
    return handle - start


def _unlike_transcript(
    row: dict[str, Any],
    norm: str,
    texts: TranscriptTexts,
    transcript: list[Any],
    replay_order: range | list[int],
    fuzzy_allowed: Callable[[], bool],
) -> bool:
    """No unreplayed transcript row has this state row's visible key (its collapsed text is ``norm``) or is
    fuzzily like it, so neither the replay nor the visible-duplicate rule can fire."""
    limit = len(replay_order)
    if norm in texts.norm_set:
        calls = row.get("tool_calls")
        if not calls:
            return False
        # Equal tool calls have the same first call id: a row whose first id no transcript row with
        # its text has is unlike.
        call_id = _first_call_id(calls)
        if call_id is None:
            return False
        for i in texts.positions(norm):
            if i >= limit:
                break
            if _first_call_id(transcript[replay_order[i]].get("tool_calls")) == call_id:
                return False
    if not norm or not fuzzy_allowed():
        return True
    by_text, by_tokens = texts.fuzzy_hits(norm)
    if not by_text and not by_tokens:
        return True
    role, api = row.get("role"), api_content(row)
    for positions in (by_text, by_tokens):
        for i in positions:
            if i >= limit:
                break
            other = transcript[replay_order[i]]
            if other.get("role") == role and api_content(other) == api:
                return False
    return True


def _first_call_id(calls: Any) -> str | None:
    """The ``id`` of the first of these tool calls, when it is a string."""
    first = calls[0] if isinstance(calls, (list, tuple)) and calls else None
    call_id = first.get("id") if isinstance(first, dict) else None
    return call_id if isinstance(call_id, str) else None


def context_tail(context: list[Any], state: list[Any]) -> list[Any] | None:
    """``state[len(context):]`` when that is all the reconciled model context adds to ``context`` and the
    raw rows show it; ``None`` when the rules must decide.

    It is, with no watermark, no claimed CLI session and no interrupted turn (the caller's to check),
    when the context has two rows or more and: every text of the context is a plain string with no workspace tag or compaction wording (so no
    marker, and the keys read the texts as they are); no state row has ``api_content`` (nothing to copy);
    the state's first rows equal the context's as dicts, or in the raw fields of their content keys (so
    the context delta is the rest); and the rest are rows a new turn added (``count_plainly_new``).
    """
    size = len(context)
    if size < 2 or len(state) < size:
        return None  # a one-row context is aligned with state.db only in one case: the rules decide
    head, tail = state[:size], state[size:]
    equal = list(map(eq, head, context))
    try:
        contents = list(map(dict.get, context, repeat("content")))
        if PLAIN_UNTAGGED_TEXTS.failing(contents) or any(map(dict.get, state, repeat("api_content"))):
            return None
    except TypeError:  # a row that is not a dict, or a text that is not a string
        return None
    if False in equal:
        unequal = list(map(not_, equal))
        if not all(map(same_raw_content, compress(head, unequal), compress(context, unequal))):
            return None
    if not tail:
        return tail
    texts = transcript_texts(contents, tokens, FUZZY_MAX_CHARS, Rows.local_norms)
    fuzzy = fuzzy_settled(size, texts)
    if fuzzy is None:
        return None
    taken = count_plainly_new(
        tail,
        0,
        newest=newest_time(list(map(dict.get, context, repeat("timestamp")))),
        texts=texts,
        transcript=context,
        replay_order=range(size),
        fuzzy_allowed=fuzzy.__bool__,
    )
    return tail if taken == len(tail) else None

"""History edits: retry, undo, truncate (edit), clear, and the watermark helpers they stamp.

Each edit that shrinks ``messages`` stamps its provenance (``intentional_shrink_generation`` or
``clear_generation``) and a truncation watermark, so neither reconciliation nor recovery revives
what the person removed. A retry or an edit first keeps the rows it cuts as a version the person can
switch back to (``api/rules/version_rules.py``); an undo or a clear drops the versions of what it removes.
"""

from __future__ import annotations

import copy
import json
import time
import uuid
from typing import Any

from api.agent import interrupted_turns, turn_journal
from api.rules import version_rules
from api.rules.errors import BadRequest
from api.rules.session_fields import float_or_none, message_text
from api.store import models, version_store
from api.store.session_edit import edit


def _truncation_watermark_for(messages: list[Any]) -> float:
    """The newest kept row's timestamp (``timestamp``, else ``_ts``); 0.0 for none or unreadable."""
    if not messages:
        return 0.0
    last = messages[-1]
    if not isinstance(last, dict):
        return 0.0
    for key in ("timestamp", "_ts"):
        value = float_or_none(last.get(key))
        if value:
            return value
    return 0.0


def _stamp_intentional_shrink_generation(session: models.Session, old_n: int, new_n: int) -> None:
    if new_n < old_n:
        session.intentional_shrink_generation = uuid.uuid4().hex


# ---------------------------------------------------------------------- context alignment


def _row_signature(msg: Any) -> tuple[Any, ...]:
    if not isinstance(msg, dict):
        return ("non_dict", repr(msg))
    calls = msg.get("tool_calls")
    return (
        msg.get("role"),
        json.dumps(msg.get("content"), sort_keys=True, default=str),
        msg.get("tool_call_id"),
        msg.get("name") or msg.get("tool_name"),
        json.dumps(calls, sort_keys=True, default=str) if calls else "",
    )


def truncate_context_for_display_keep(display: list[Any], context: list[Any], keep: int) -> list[Any]:
    """Cut the model context where the visible transcript is cut at ``keep`` (prefer keeping less)."""
    if not context:
        return []
    if len(display) == len(context):
        return context[:keep]
    kept_sigs = [_row_signature(m) for m in display[:keep]]
    dropped_sigs = {_row_signature(m) for m in display[keep:]}
    ctx_sigs = [_row_signature(m) for m in context]
    # First context row that matches a dropped display row (and not a kept one) is the cut.
    kept_set = set(kept_sigs)
    for i, sig in enumerate(ctx_sigs):
        if sig in dropped_sigs and sig not in kept_set:
            return context[:i]
    if kept_sigs:
        last_kept = kept_sigs[-1]
        for i in range(len(ctx_sigs) - 1, -1, -1):
            if ctx_sigs[i] == last_kept:
                return context[: i + 1]
    # Fallback: a context-only leading prefix (a compaction summary) plus ``keep`` rows.
    display_sigs = {_row_signature(m) for m in display}
    lead = 0
    while lead < len(ctx_sigs) and ctx_sigs[lead] not in display_sigs:
        lead += 1
    return context[: lead + keep] if keep else context[:lead]


def forget_compression(session: models.Session) -> None:
    """Drop the compressed context, its anchor and its undo: the model is sent the transcript again."""
    session.context_messages = []
    session.compression_anchor_visible_idx = None
    session.compression_anchor_message_key = None
    session.compression_anchor_summary = None
    session.compression_undo = None


def _cut_reaches_compressed_rows(session: models.Session, keep: int) -> bool:
    """Whether keeping ``keep`` rows removes the compression's anchor row or rows before it.

    Its summary (and the context an uncompress would restore) then speaks of rows the person removed.
    """
    details = (
        session.compression_anchor_details if isinstance(session.compression_anchor_details, dict) else {}
    )
    anchor = details.get("message_idx")
    if not isinstance(anchor, int) or isinstance(anchor, bool):
        anchor = session.compression_anchor_visible_idx
    return isinstance(anchor, int) and not isinstance(anchor, bool) and keep <= anchor


def truncate_session_at_keep(session: models.Session, keep: int) -> tuple[int, int]:
    """Keep the first ``keep`` visible rows; align the context; stamp provenance. Caller holds the lock and saves."""
    old_msgs = session.messages
    old_n, old_ctx = len(old_msgs), len(session.context_messages)
    kept = old_msgs[:keep]
    if _cut_reaches_compressed_rows(session, keep):
        forget_compression(session)
    session.context_messages = truncate_context_for_display_keep(old_msgs, session.context_messages, keep)
    session.messages = kept
    _stamp_intentional_shrink_generation(session, old_n, len(kept))
    _stamp_edit_watermark(session)
    return old_n, old_ctx


def _stamp_edit_watermark(session: models.Session) -> None:
    """Watermark and boundary at the newest kept row of the transcript or of the compressed context.

    A compressed context's rows carry the time of the compression, later than the transcript rows they
    stand for; a boundary below them would let the removed turn's state.db rows back into the model's
    context as rows newer than the context.
    """
    mark = max(
        _truncation_watermark_for(session.messages), _truncation_watermark_for(session.context_messages)
    )
    session.truncation_watermark = session.truncation_boundary = mark


def _last_user_index(messages: list[Any]) -> int | None:
    for i in range(len(messages) - 1, -1, -1):
        m = messages[i]
        if isinstance(m, dict) and m.get("role") == "user":
            return i
    return None


def _cut_to_last_user(session: models.Session, empty_message: str) -> tuple[dict[str, Any], list[Any]]:
    idx = _last_user_index(session.messages)
    if idx is None:
        raise ValueError(empty_message)
    removed = session.messages[idx:]
    last_user = session.messages[idx]
    old_n = len(session.messages)
    if _cut_reaches_compressed_rows(session, idx):
        forget_compression(session)
    session.messages = session.messages[:idx]
    _stamp_intentional_shrink_generation(session, old_n, idx)
    if session.context_messages:
        cidx = _last_user_index(session.context_messages)
        if cidx is not None:
            session.context_messages = session.context_messages[:cidx]
    _stamp_edit_watermark(session)
    return last_user, removed


def retry_last(
    sid: str, *, store: models.Store | None = None, turns: turn_journal.LiveTurns | None = None
) -> dict[str, Any]:
    """Remove the last user turn and what followed, returning its text for the composer to resend.

    The removed turn stays reachable as a version of that message.
    """
    with edit(sid, store=store) as session:
        interrupted_turns.close_unless_live(session, interrupted_turns.STILL_STREAMING, turns=turns)
        idx = _last_user_index(session.messages)
        if idx is not None:
            keep_tail_as_version(session, idx)
        last_user, removed = _cut_to_last_user(session, "No previous message to retry.")
    return {"last_user_text": message_text(last_user), "removed_count": len(removed)}


def undo_last(
    sid: str, *, store: models.Store | None = None, turns: turn_journal.LiveTurns | None = None
) -> dict[str, Any]:
    """Remove the last user turn and its answer."""
    with edit(sid, store=store) as session:
        interrupted_turns.close_unless_live(session, interrupted_turns.STILL_STREAMING, turns=turns)
        last_user, removed = _cut_to_last_user(session, "Nothing to undo.")
        path, gone = session.path, forget_versions_from(session, len(session.messages))
    version_store.remove(path, gone)
    preview = message_text(last_user)
    return {
        "removed_count": len(removed),
        "removed_preview": preview[:40] + ("..." if len(preview) > 40 else ""),
    }


def truncate_session(
    sid: str,
    keep_count: Any,
    *,
    store: models.Store | None = None,
    turns: turn_journal.LiveTurns | None = None,
) -> dict[str, Any]:
    """Edit: keep the first ``keep_count`` visible messages."""
    if isinstance(keep_count, bool) or not isinstance(keep_count, int) or keep_count < 0:
        raise BadRequest("keep_count must be a non-negative integer")
    with edit(sid, store=store) as session:
        interrupted_turns.close_unless_live(session, interrupted_turns.STILL_STREAMING, turns=turns)
        if keep_count > len(session.messages):
            raise BadRequest("keep_count is larger than the conversation")
        keep_tail_as_version(session, keep_count)
        old_n, _ = truncate_session_at_keep(session, keep_count)
    return {"removed_count": old_n - keep_count}


def clear_session(
    sid: str, *, store: models.Store | None = None, turns: turn_journal.LiveTurns | None = None
) -> dict[str, Any]:
    """Empty the conversation; the 0.0 watermark and a ``clear_generation`` keep it empty."""
    with edit(sid, store=store) as session:
        interrupted_turns.close_unless_live(session, interrupted_turns.STILL_STREAMING, turns=turns)
        had_messages = bool(session.messages)
        old_n, _ = truncate_session_at_keep(session, 0)
        session.context_messages = []
        session.tool_calls = []
        if session.parent_session_id and _is_snapshot_parent(session.parent_session_id, session.home()):
            session.parent_session_id = None
        session.clear_pending_turn()
        forget_compression(session)
        if had_messages:
            session.clear_generation = uuid.uuid4().hex
        if not session.manual_title:
            session.title = "Untitled"
        path, gone = session.path, forget_versions_from(session, 0)
    version_store.remove(path, gone)
    return {"removed_count": old_n}


# ---------------------------------------------------------------------- versions


def context_tail(session: models.Session, index: int) -> list[Any] | None:
    """The model context's rows for the transcript's rows from ``index`` on; None: the transcript is the context."""
    if not session.context_messages:
        return None
    kept = truncate_context_for_display_keep(session.messages, session.context_messages, index)
    return session.context_messages[len(kept) :]


def keep_tail_as_version(session: models.Session, index: int) -> None:
    """Before a cut at ``index`` (edit, regenerate): keep the rows from there on as a version of that message.

    The kept file is written before the session file that names it; the groups inside the tail go with it.
    """
    if index >= len(session.messages):
        return
    groups = version_rules.groups_of(session.message_versions)
    _before, _at, inner = version_rules.split_at(groups, index)
    kept = version_store.keep(
        session.path, session.session_id, index, session.messages[index:], context_tail(session, index), inner
    )
    session.message_versions = version_rules.add_version(groups, index, kept)


def forget_versions_from(session: models.Session, index: int) -> set[str]:
    """Drop the versions of rows removed for good (undo, clear); answers the kept ids to remove after the save."""
    groups = version_rules.groups_of(session.message_versions)
    stay, dropped = version_rules.drop_from(groups, index)
    if not dropped:
        return set()
    session.message_versions = stay or None
    return version_store.reachable(session.path, groups) - version_store.reachable(session.path, stay)


def show_tail(session: models.Session, index: int, rows: list[Any], context_rows: list[Any] | None) -> None:
    """Show ``rows`` from ``index`` on in place of the rows there (a version switch; the caller kept those).

    The context follows: a compression whose rows the cut reaches is forgotten, as for an edit. The
    watermark moves past every row either version holds, so no row of the version now hidden comes back
    from state.db.
    """
    hidden_newest = _truncation_watermark_for(session.messages)
    old_n, old_shrink = len(session.messages), session.intentional_shrink_generation
    truncate_session_at_keep(session, index)
    if session.context_messages:
        added = context_rows if context_rows is not None else rows
        session.context_messages = [*session.context_messages, *copy.deepcopy(added)]
    session.messages = [*session.messages, *rows]
    if len(session.messages) >= old_n:
        session.intentional_shrink_generation = old_shrink  # nothing shrank: no deliberate-shrink mark
    newest = max(hidden_newest, _truncation_watermark_for(session.messages))
    session.truncation_watermark = session.truncation_boundary = max(time.time(), newest)


def _is_snapshot_parent(parent_sid: str, store: models.Store) -> bool:
    try:
        parent = models.Session.load_metadata_only(parent_sid, store)
    except (ValueError, OSError):
        return False
    return bool(parent and parent.pre_compression_snapshot)


def advance_watermark_after_turn(session: models.Session, user_ts: float | None = None) -> None:
    """After a new user turn is durably committed, move a truthy watermark up to it (0.0 stays)."""
    if not session.truncation_watermark:
        return
    if user_ts is None:
        for m in reversed(session.messages):
            if isinstance(m, dict) and m.get("role") == "user":
                user_ts = float_or_none(m.get("timestamp"))
                break
    session.truncation_watermark = user_ts if user_ts and user_ts > 0 else time.time()

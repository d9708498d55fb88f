"""Branching: a new durable session holding a conversation's history up to a chosen message.

The branch is an ordinary session (own id, own file, own turns) whose ``parent_session_id`` names the
conversation it came from and whose ``session_source`` is ``"fork"``: hermes-webui reads a parent without
that source as a compression continuation and shows the parent's rows in it. It takes the visible
transcript only: its first turn's model context is that transcript (no compression state is carried
over, so the branch's context is exactly what it shows). A kept tool call keeps its result rows. The
parent is not changed.
"""

from __future__ import annotations

import copy
import time
from typing import Any

from api.agent import interrupted_turns, turn_journal
from api.rules.errors import BadRequest, Conflict
from api.rules.session_fields import new_session_id
from api.services.session_catalogue import TITLE_MAX, save_new
from api.store import models, session_edit

# Row flags of the live turn machinery that mean nothing in a new session.
_TURN_FLAGS = ("_partial", "_pending")


def _branch_title(title: str | None) -> str:
    base = (title or "Untitled").strip() or "Untitled"
    suffix = " (branch)"
    return base[: TITLE_MAX - len(suffix)] + suffix


# hermes-webui's name for a session branched off another (not a compression continuation).
FORK_SOURCE = "fork"


def _call_ids(rows: list[Any]) -> set[str]:
    ids: set[str] = set()
    for row in rows:
        calls = row.get("tool_calls") if isinstance(row, dict) else None
        for call in calls if isinstance(calls, list) else ():
            if isinstance(call, dict) and isinstance(call.get("id"), str):
                ids.add(call["id"])
    return ids


def _with_tool_results(messages: list[Any], keep_count: int) -> int:
    """``keep_count`` extended over the tool rows right after it that answer a kept tool call.

    A call without its result would stay "running" in the branch for ever, and the model would be sent a
    call nobody answered.
    """
    calls = _call_ids(messages[:keep_count])
    end = keep_count
    while end < len(messages):
        row = messages[end]
        if not (isinstance(row, dict) and row.get("role") == "tool" and row.get("tool_call_id") in calls):
            break
        end += 1
    return end


def branch_rows(messages: list[Any], keep_count: Any) -> list[dict[str, Any]]:
    """Copies of the first ``keep_count`` rows and the results of their tool calls, without live-turn flags."""
    if isinstance(keep_count, bool) or not isinstance(keep_count, int) or keep_count < 0:
        raise BadRequest("keep_count must be a non-negative integer")
    if keep_count > len(messages):
        raise BadRequest("keep_count is larger than the conversation")
    rows = []
    for row in copy.deepcopy(messages[: _with_tool_results(messages, keep_count)]):
        if isinstance(row, dict):
            for flag in _TURN_FLAGS:
                row.pop(flag, None)
            rows.append(row)
    return rows


def branch_session(
    sid: str,
    keep_count: Any,
    *,
    store: models.Store | None = None,
    turns: turn_journal.LiveTurns | None = None,
) -> dict[str, Any]:
    """A new session with the parent's first ``keep_count`` messages; answers its full payload."""
    with session_edit.lock(sid, store=store):
        parent = interrupted_turns.settled_session(sid, store=store, turns=turns)
        if parent.read_only:
            raise Conflict("This session is read-only.")
        rows = branch_rows(parent.messages, keep_count)
        now = time.time()
        child = models.Session(
            session_id=new_session_id(),
            title=_branch_title(parent.title),
            workspace=parent.workspace,
            model=parent.model,
            model_provider=parent.model_provider,
            parent_session_id=sid,
            session_source=FORK_SOURCE,
            messages=rows,
            created_at=now,
            updated_at=now,
        )
    return save_new(child, store=store)

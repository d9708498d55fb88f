"""Branching: a new durable session holding a conversation's history up to a chosen message.

The branch is an ordinary session (own id, own file, own turns) whose ``parent_session_id`` names the
conversation it came from. It takes the visible transcript only: its first turn's model context is
that transcript (no compression state is carried over, so the branch's context is exactly what it
shows). The parent is not changed.
"""

from __future__ import annotations

import copy
import time
from typing import Any

from api import config as _config
from api import models
from api.errors import BadRequest, Conflict
from api.session_catalogue import TITLE_MAX
from api.session_fields import new_session_id
from api.session_ops import editable_session
from api.session_views import full_session

# Row flags of the live turn machinery that mean nothing in a new session.
_TURN_FLAGS = ("_partial", "_pending")


def _branch_title(title: str | None) -> str:
    base = (title or "Untitled").strip() or "Untitled"
    suffix = " (branch)"
    return base[: TITLE_MAX - len(suffix)] + suffix


def branch_rows(messages: list, keep_count: Any) -> list[dict]:
    """Copies of the first ``keep_count`` rows, without live-turn flags."""
    if isinstance(keep_count, bool) or not isinstance(keep_count, int) or keep_count < 0:
        raise BadRequest("keep_count must be a non-negative integer")
    if keep_count > len(messages):
        raise BadRequest("keep_count is larger than the conversation")
    rows = []
    for row in copy.deepcopy(messages[:keep_count]):
        if isinstance(row, dict):
            for flag in _TURN_FLAGS:
                row.pop(flag, None)
            rows.append(row)
    return rows


def branch_session(sid: str, keep_count: Any) -> dict:
    """A new session with the parent's first ``keep_count`` messages; answers its full payload."""
    with _config._get_session_agent_lock(sid):
        parent = editable_session(sid)
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
            messages=rows,
            created_at=now,
            updated_at=now,
        )
    with _config._get_session_agent_lock(child.session_id):
        child.save()
        models.cache_session(child)
    return full_session(child)

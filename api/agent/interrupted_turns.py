"""Turns a session file still calls pending while no turn of this process runs them.

A process that is gone (crash, kill, power loss) or a final save that failed leaves the write-ahead
fields set; the turn is closed with what was saved and a visible marker, never an invented answer
(docs/turns.md, "Interrupted turns").
"""

from __future__ import annotations

import copy
import logging
import time
from pathlib import Path
from typing import Any

from api.agent import questions, turn_journal
from api.rules.errors import ApiError, Conflict
from api.rules.session_fields import message_text
from api.store import models, session_edit

log = logging.getLogger("talaria.interrupted_turns")

INTERRUPTED_TEXT = "⚠ This answer was interrupted (the server stopped before it finished)."
STILL_STREAMING = "Session is still streaming; wait for the current turn to finish."


def interrupted_marker() -> dict[str, Any]:
    """The visible row that says an answer was cut short."""
    return {
        "role": "assistant",
        "content": INTERRUPTED_TEXT,
        "timestamp": time.time(),
        "_error": True,
        "_interrupted": True,
    }


def close_unless_live(
    session: models.Session, refusal: str, *, turns: turn_journal.LiveTurns | None = None
) -> bool:
    """409 with ``refusal`` while a turn of this process (of ``turns``, the caller's app's) streams in the
    session; else close a turn the file still calls pending (True when one was closed; the caller saves)."""
    live = turn_journal.live_turn_for(session.session_id, turns=turns)
    if live is not None:
        raise Conflict(refusal, stream_id=live.stream_id)  # so the page can offer to follow that turn
    return close_pending_turn(session)


def settled_session(
    sid: str, *, store: models.Store | None = None, turns: turn_journal.LiveTurns | None = None
) -> models.Session:
    """The session, once a turn its file still calls pending is closed and saved; 409 while one streams
    here, 404 when missing. For work that reads the session now and changes it later (compression)."""
    with session_edit.edit(sid, touch_updated_at=False, store=store) as session:
        if not close_unless_live(session, STILL_STREAMING, turns=turns):
            raise session_edit.Unchanged
    return session


def close_pending_turn(session: models.Session) -> bool:
    """Close a turn the session still calls pending: keep what was saved, add a visible marker."""
    if not (session.active_stream_id or session.pending_user_message):
        return False
    pending = session.pending_user_message
    user_row = next(
        (
            m
            for m in reversed(session.messages[-3:])
            if isinstance(m, dict) and m.get("role") == "user" and message_text(m) == pending
        ),
        None,
    )
    if pending and user_row is None:
        ts = session.pending_started_at or time.time()
        user_row = {"role": "user", "content": pending, "timestamp": ts, "_recovered": True}
        session.messages.append(user_row)
    if user_row is not None and session.pending_attachments and not user_row.get("attachments"):
        user_row["attachments"] = copy.deepcopy(session.pending_attachments)  # cleared with the pending turn
    session.messages.extend(questions.notes_after_restart(session))
    session.messages.append(interrupted_marker())
    session.clear_pending_turn()
    return True


def recover_interrupted_turns(session_dir: Path) -> list[str]:
    """At startup: every session left mid-turn gets its interrupted marker (index rows say which)."""
    marked = []
    for row in models.store().index.all_rows(Path(session_dir), Path(session_dir) / "_index.json"):
        if not (row.get("active_stream_id") or row.get("pending_user_message")):
            continue
        sid = row["session_id"]
        closed = False
        try:
            with session_edit.edit(sid, touch_updated_at=False) as session:
                closed = close_pending_turn(session)
                if not closed:
                    raise session_edit.Unchanged
        except ApiError as exc:  # gone, unreadable or changed by another program: the next start tries again
            log.warning("could not close the interrupted turn of %s: %s", sid, exc.message)
            continue
        if closed:
            marked.append(sid)
    if marked:
        log.warning("marked %d interrupted turn(s): %s", len(marked), ", ".join(marked))
    return marked

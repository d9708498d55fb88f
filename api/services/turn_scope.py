"""What one turn's agent works in and how it asks the person: the session's workspace, and its approval
and clarify questions reported into the turn's journal. ``api.services.streaming`` builds one per turn and
settles the questions when the turn is cancelled or the server stops.
"""

from __future__ import annotations

import functools

from api.agent import agent_binding, approvals, clarify
from api.agent.agent_events import OnEvent
from api.agent.questions import CANCELLED
from api.services import workspace
from api.store import models


def for_turn(session: models.Session, emit: OnEvent, folder: str | None = None) -> agent_binding.TurnScope:
    """``folder``: the remote folder of a session in another execution environment (its local workspace is
    not used then); None runs in the session's local workspace, checked now."""
    sid = session.session_id
    return agent_binding.TurnScope(
        session_id=sid,
        workspace=folder if folder is not None else workspace.for_turn(session),
        ask_approval=functools.partial(approvals.ask, sid, emit),
        ask_clarify=functools.partial(clarify.ask, sid, emit),
        yolo=approvals.yolo(sid),
    )


def cancel(session_id: str) -> None:
    """The session's turn was stopped: whatever it waits on is settled (an approval as deny)."""
    approvals.QUESTIONS.get().cancel_session(session_id, CANCELLED)
    clarify.QUESTIONS.get().cancel_session(session_id, CANCELLED)


def stop_all() -> None:
    """The server is stopping: every waiting question is settled, and any asked from now on."""
    approvals.QUESTIONS.get().stop()
    clarify.QUESTIONS.get().stop()

"""What one turn's agent works in and how it asks the person: the session's workspace, and its approval
and clarify questions reported into the turn's journal. ``api.services.streaming`` builds one per turn and
settles the questions when the turn is cancelled or the server stops.
"""

from __future__ import annotations

import functools

from api.agent import agent_binding, approvals, clarify
from api.agent.agent_events import OnEvent
from api.agent.questions import CANCELLED, Questions
from api.services import workspace
from api.store import models

# An app's open approvals, open clarify questions and "don't ask again" switches.
Asking = tuple[Questions, Questions, set[str]]


def for_turn(
    session: models.Session, emit: OnEvent, folder: str | None = None, *, asking: Asking | None = None
) -> agent_binding.TurnScope:
    """``folder``: the remote folder of a session in another execution environment (its local workspace is
    not used then); None runs in the session's local workspace, checked now. ``asking``: the turn's app's
    questions and yolo switches (those in use when None)."""
    sid = session.session_id
    approval_questions, clarify_questions, switches = asking or (None, None, None)
    return agent_binding.TurnScope(
        session_id=sid,
        workspace=folder if folder is not None else workspace.for_turn(session),
        ask_approval=functools.partial(approvals.ask, sid, emit, questions=approval_questions),
        ask_clarify=functools.partial(clarify.ask, sid, emit, questions=clarify_questions),
        yolo=approvals.yolo(sid, switches),
    )


def cancel(session_id: str, *, asking: Asking | None = None) -> None:
    """The session's turn was stopped: whatever it waits on is settled (an approval as deny)."""
    approval_questions, clarify_questions, _switches = asking or (None, None, None)
    approvals.QUESTIONS.get(approval_questions).cancel_session(session_id, CANCELLED)
    clarify.QUESTIONS.get(clarify_questions).cancel_session(session_id, CANCELLED)


def stop_all(*, asking: Asking | None = None) -> None:
    """The server is stopping: every waiting question is settled, and any asked from now on."""
    approval_questions, clarify_questions, _switches = asking or (None, None, None)
    approvals.QUESTIONS.get(approval_questions).stop()
    clarify.QUESTIONS.get(clarify_questions).stop()

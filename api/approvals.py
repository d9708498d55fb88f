"""Approvals: a command hermes-agent flags waits for the person's once / session / always / deny.

The agent's own gateway path (``tools.approval``, wired in ``api.agent_binding.session_bound``) detects
the command, keeps the session and "always" allow-lists and the session yolo; here are the question, the
person's answer, and what the agent is told when nobody answered: it fails closed (deny) on a timeout, a
cancelled turn or a stopping server, and says which.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from api import agent_binding, session_lookup
from api import config as _config
from api.agent_events import OnEvent
from api.errors import BadRequest
from api.questions import ANSWERED, CANCELLED, STOPPED, TIMEOUT, Question, Questions

CHOICES = ("once", "session", "always", "deny")
QUESTIONS = Questions("approval")
_YOLO: set[str] = set()  # sessions whose person turned "don't ask again" on (until the server stops)


def deny_reason(question: Question) -> str | None:
    """Why Talaria denied on the person's behalf (None when the person answered)."""
    if question.outcome == ANSWERED:
        return None
    return {
        TIMEOUT: f"Talaria denied it: nobody answered within {question.timeout_s:g} s",
        CANCELLED: "Talaria denied it: the turn was stopped while the command waited for approval",
        STOPPED: "Talaria denied it: the server stopped while the command waited for approval",
    }.get(question.outcome or "", "Talaria denied it")


def decision(question: Question) -> tuple[str, str | None]:
    """What the agent is told: ``(choice, deny_reason)``; anything but an answer is a deny."""
    reason = deny_reason(question)
    return (question.answer if reason is None else "deny"), reason


def ask(
    session_id: str, emit: OnEvent, data: dict, interrupted: Callable[[], bool]
) -> tuple[str, str | None]:
    """Show the flagged command to the person and block until it is decided: ``(choice, deny_reason)``."""
    payload = {
        "command": str(data.get("command") or ""),
        "description": str(data.get("description") or ""),
        "pattern_key": str(data.get("pattern_key") or ""),
        "pattern_keys": [str(k) for k in data.get("pattern_keys") or []],
        "allow_permanent": data.get("allow_permanent") is not False,
    }
    timeout_s = float(_config.setting("approval_timeout"))
    question = QUESTIONS.ask(session_id, payload, timeout_s, emit, interrupted, _resolution)
    return decision(question)


def _resolution(question: Question) -> dict:
    choice, reason = decision(question)
    return {"choice": choice, "reason": reason}


def respond(session_id: str, approval_id: Any, choice: Any) -> dict:
    if choice not in CHOICES:
        raise BadRequest(f"choice must be one of: {', '.join(CHOICES)}")
    if not isinstance(approval_id, str) or not approval_id:
        raise BadRequest("approval_id must be a non-empty string")
    QUESTIONS.answer(session_id, approval_id, choice)
    return {"ok": True, "approval_id": approval_id, "choice": choice}


def pending(session_id: str) -> dict:
    session_lookup.load_session(session_id)
    return {"pending": QUESTIONS.pending(session_id), "yolo": yolo(session_id)}


def yolo(session_id: str) -> bool:
    return session_id in _YOLO


def set_yolo(session_id: str, enabled: Any) -> dict:
    """The session's explicit "don't ask again" switch (the agent's session yolo; off until turned on)."""
    if not isinstance(enabled, bool):
        raise BadRequest("enabled must be true or false")
    session_lookup.load_session(session_id)
    (_YOLO.add if enabled else _YOLO.discard)(session_id)
    agent_binding.apply_session_yolo(session_id, enabled)
    return {"ok": True, "session_id": session_id, "yolo": enabled}

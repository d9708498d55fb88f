"""Clarify: the agent's ``clarify`` tool asks the person a question (free text or one of its choices).

No answer within ``clarify_timeout``, a cancelled turn or a stopping server tell the agent plainly that
there was none, so it can go on without one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from api.agent.agent_events import OnEvent
from api.agent.questions import ANSWERED, CANCELLED, STOPPED, TIMEOUT, Question, Questions
from api.rules.errors import BadRequest
from api.store import config as _config
from api.store import models, session_lookup
from api.store.in_use import InUse

RESPONSE_MAX_CHARS = 20_000
QUESTIONS: InUse[Questions] = InUse(lambda: Questions("clarify"))  # the app's (``App.clarify``)


def no_answer_text(question: Question) -> str:
    why = {
        TIMEOUT: f"nobody answered within {question.timeout_s:g} s",
        CANCELLED: "the turn was stopped",
        STOPPED: "the server stopped",
    }.get(question.outcome or "", "no answer")
    return f"[The person did not answer this question ({why}). Do not assume an answer.]"


def ask(
    session_id: str,
    emit: OnEvent,
    question_text: str,
    choices: list[Any] | None,
    interrupted: Callable[[], bool],
    *,
    questions: Questions | None = None,
) -> str:
    """Put the agent's question to the person (among ``questions``, the turn's app's; those in use when None)
    and block: their answer, or a plain "no answer" text."""
    offered = [str(c) for c in choices] if choices else None
    payload = {"question": str(question_text or ""), "choices": offered}
    timeout_s = float(_config.setting("clarify_timeout"))
    question = QUESTIONS.get(questions).ask(session_id, payload, timeout_s, emit, interrupted)
    return str(question.answer) if question.outcome == ANSWERED else no_answer_text(question)


def respond(
    session_id: str, clarify_id: Any, response: Any, *, questions: Questions | None = None
) -> dict[str, Any]:
    """Answer the question among ``questions`` (the app's open clarify questions; those in use when None)."""
    if not isinstance(response, str) or not response.strip():
        raise BadRequest("response must be a non-empty string")
    if len(response) > RESPONSE_MAX_CHARS:
        raise BadRequest(f"response is too long (at most {RESPONSE_MAX_CHARS} characters)")
    if not isinstance(clarify_id, str) or not clarify_id:
        raise BadRequest("clarify_id must be a non-empty string")
    QUESTIONS.get(questions).answer(session_id, clarify_id, response.strip())
    return {"ok": True, "clarify_id": clarify_id}


def pending(
    session_id: str, *, questions: Questions | None = None, store: models.Store | None = None
) -> dict[str, Any]:
    session_lookup.load_session(session_id, store=store)
    return {"pending": QUESTIONS.get(questions).pending(session_id)}

"""``api.agent.clarify`` in process: the person's answer reaches the agent; no answer is said plainly."""

from __future__ import annotations

import pytest

from api.agent import clarify
from api.rules.errors import BadRequest
from api.store.models import Session
from talaria_testing.asking import answer_when_asked


@pytest.fixture
def sid(state_dir):
    Session(session_id="cl1", messages=[{"role": "user", "content": "hi"}]).save()
    return "cl1"


def test_a_clarify_answer_is_returned_and_no_answer_says_so(sid):
    emit = answer_when_asked([], lambda data: clarify.respond(sid, data["clarify_id"], "  blue  "))
    assert clarify.ask(sid, emit, "Which colour?", ["red", "blue"], lambda: False) == "blue"
    unanswered = clarify.ask(sid, lambda *_: None, "Anything else?", None, lambda: True)
    assert "did not answer" in unanswered and "the turn was stopped" in unanswered


def test_an_empty_or_huge_response_is_refused(sid):
    for response in ("", "   ", None, 5, "x" * 20001):
        with pytest.raises(BadRequest):
            clarify.respond(sid, "any-id", response)

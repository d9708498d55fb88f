"""``api.clarify`` in process: the person's answer reaches the agent; no answer is said plainly."""

from __future__ import annotations

import pytest

from api import clarify
from api.errors import BadRequest
from tests.test_approvals import answer_when_asked, sid  # noqa: F401 (the session fixture)


def test_a_clarify_answer_is_returned_and_no_answer_says_so(sid):  # noqa: F811
    emit = answer_when_asked([], lambda data: clarify.respond(sid, data["clarify_id"], "  blue  "))
    assert clarify.ask(sid, emit, "Which colour?", ["red", "blue"], lambda: False) == "blue"
    unanswered = clarify.ask(sid, lambda *_: None, "Anything else?", None, lambda: True)
    assert "did not answer" in unanswered and "the turn was stopped" in unanswered


def test_an_empty_or_huge_response_is_refused(sid):  # noqa: F811
    for response in ("", "   ", None, 5, "x" * 20001):
        with pytest.raises(BadRequest):
            clarify.respond(sid, "any-id", response)

"""``api.approvals`` in process: what the agent is told for each way a question ends, and that a failure
while asking leaves nothing open (the command is refused, the session can be asked again)."""

from __future__ import annotations

import pytest

from api import approvals
from api.errors import BadRequest
from api.models import Session
from talaria_testing.asking import answer_when_asked

DATA = {"command": "rm -rf /srv/x", "description": "recursive delete", "pattern_key": "recursive delete"}


@pytest.fixture
def sid(state_dir):
    Session(session_id="ap1", messages=[{"role": "user", "content": "hi"}]).save()
    return "ap1"


def test_the_persons_choice_reaches_the_agent_and_the_journal(sid):
    events: list = []
    emit = answer_when_asked(events, lambda data: approvals.respond(sid, data["approval_id"], "session"))
    assert approvals.ask(sid, emit, DATA, lambda: False) == ("session", None)
    assert [name for name, _ in events] == ["approval", "approval_resolved"]
    assert events[0][1]["command"] == "rm -rf /srv/x" and events[1][1]["outcome"] == "answered"
    assert Session.load(sid).pending_question is None


def test_an_interrupted_turn_denies_and_says_why(sid):
    choice, reason = approvals.ask(sid, lambda *_: None, DATA, lambda: True)
    assert choice == "deny" and "the turn was stopped" in reason


def test_a_failure_while_asking_leaves_no_question_open(sid):
    def broken(name, data):
        raise RuntimeError("the journal is gone")

    with pytest.raises(RuntimeError):
        approvals.ask(sid, broken, DATA, lambda: False)
    assert approvals.pending(sid)["pending"] == []
    assert approvals.ask(sid, lambda *_: None, DATA, lambda: True)[0] == "deny"  # asking again works


def test_an_invalid_choice_is_refused_before_any_lookup(sid):
    for choice in ("yes", "", None, ["once"], "ONCE"):
        with pytest.raises(BadRequest):
            approvals.respond(sid, "any-id", choice)

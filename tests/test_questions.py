"""``api.agent.questions``: one registry per kind — answer once, refuse others' and settled ids, settle on the
deadline, an interrupt or a stop — and the durable trace a restart turns into a transcript note."""

from __future__ import annotations

import threading

import pytest

from api.agent import questions
from api.agent.questions import ANSWERED, CANCELLED, STOPPED, TIMEOUT, Questions
from api.rules.errors import Conflict, NotFound
from api.store.models import Session


def test_an_answer_settles_the_question_once_and_only_for_its_session():
    registry = Questions("approval")
    question = registry.open("s1", {"command": "rm -rf x"}, timeout_s=60)
    assert registry.pending("s1") == [question.public()] and registry.pending("s2") == []
    assert question.public()["approval_id"] == question.id
    with pytest.raises(NotFound):
        registry.answer("s2", question.id, "once")
    with pytest.raises(NotFound):
        registry.answer("s1", "no-such-id", "once")
    registry.answer("s1", question.id, "deny")
    assert (question.outcome, question.answer) == (ANSWERED, "deny")
    with pytest.raises(Conflict):
        registry.answer("s1", question.id, "once")
    with pytest.raises(NotFound):  # another session never learns the id existed
        registry.answer("s2", question.id, "once")
    assert registry.pending("s1") == []


def test_one_question_waits_per_session():
    registry = Questions("clarify")
    registry.open("s1", {"question": "a?"}, timeout_s=60)
    with pytest.raises(Conflict):
        registry.open("s1", {"question": "b?"}, timeout_s=60)
    registry.open("s2", {"question": "c?"}, timeout_s=60)


def test_waiting_ends_on_the_deadline_or_an_interrupt():
    registry = Questions("approval")
    expired = registry.wait(registry.open("s1", {}, timeout_s=0.05))
    assert expired.outcome == TIMEOUT and expired.answer is None
    stopped = registry.wait(registry.open("s1", {}, timeout_s=60), interrupted=lambda: True)
    assert stopped.outcome == CANCELLED


def test_a_waiting_question_returns_the_answer_given_from_another_thread():
    registry = Questions("approval")
    question = registry.open("s1", {}, timeout_s=60)
    threading.Timer(0.05, registry.answer, args=("s1", question.id, "session")).start()
    assert registry.wait(question).answer == "session"


def test_cancel_settles_only_that_session_and_stop_settles_every_question_now_and_later():
    registry = Questions("approval")
    first, second = registry.open("s1", {}, 60), registry.open("s2", {}, 60)
    assert registry.cancel_session("s1") == 1
    assert first.outcome == CANCELLED and not second.settled.is_set()
    registry.stop()
    assert second.outcome == STOPPED
    assert registry.open("s3", {}, 60).outcome == STOPPED


def test_the_waiting_question_is_written_durably_and_erased(state_dir):
    Session(session_id="s1", messages=[{"role": "user", "content": "hi"}]).save()
    questions.remember("s1", {"kind": "approval", "command": "rm -rf x"})
    assert Session.load("s1").pending_question == {"kind": "approval", "command": "rm -rf x"}
    questions.remember("s1", None)
    assert Session.load("s1").pending_question is None
    questions.remember("missing", {"kind": "clarify"})  # a deleted session: nothing to write
    assert not (state_dir / "missing.json").exists()


def test_after_a_restart_the_note_names_the_command_that_did_not_run():
    session = Session(session_id="s1", pending_question={"kind": "approval", "command": "rm -rf /data/x"})
    [note] = questions.notes_after_restart(session)
    assert "rm -rf /data/x" in note["content"] and "did not run" in note["content"]
    assert note["_question"] == {"kind": "approval", "outcome": "restart"}
    assert session.pending_question is None
    assert questions.notes_after_restart(session) == []
    asked = Session(session_id="s2", pending_question={"kind": "clarify", "question": "Which colour?"})
    assert "Which colour?" in questions.notes_after_restart(asked)[0]["content"]


@pytest.fixture
def asked_session(state_dir) -> str:
    Session(session_id="s1", messages=[{"role": "user", "content": "hi"}]).save()
    return "s1"


def test_asking_writes_the_question_before_showing_it_and_erases_it_before_the_answer_returns(asked_session):
    registry = Questions("clarify")
    seen: list = []

    def emit(name, data):
        seen.append((name, data, Session.load(asked_session).pending_question))  # what is on disk now
        if name == "clarify":
            registry.answer(asked_session, data["clarify_id"], "blue")

    question = registry.ask(
        asked_session, {"question": "Which colour?"}, 60, emit, lambda: False, lambda q: {"said": q.answer}
    )
    assert (question.outcome, question.answer) == (ANSWERED, "blue")
    [(asked, shown, trace_when_shown), (resolved, told, trace_when_resolved)] = seen
    assert asked == "clarify" and shown == question.public() | {"expires_in": shown["expires_in"]}
    assert trace_when_shown == {"kind": "clarify", "question": "Which colour?", "clarify_id": question.id}
    assert resolved == "clarify_resolved"
    assert told == {"clarify_id": question.id, "outcome": ANSWERED, "said": "blue"}
    assert trace_when_resolved is None and registry.pending(asked_session) == []


@pytest.mark.parametrize("failing_event", ["approval", "approval_resolved"])
def test_an_emit_that_raises_leaves_no_question_open_or_written_and_reaches_the_asker(
    asked_session, failing_event
):
    """The trace of a question whose event could not be sent stayed in the session file, so the next
    restart told the person the server had stopped while it waited."""
    registry = Questions("approval")

    def emit(name, data):
        if name == failing_event:
            raise RuntimeError("the journal is gone")
        if name == "approval":
            registry.answer(asked_session, data["approval_id"], "once")

    with pytest.raises(RuntimeError, match="the journal is gone"):
        registry.ask(asked_session, {"command": "rm -rf x"}, 60, emit, lambda: False)
    assert registry.pending(asked_session) == []
    assert Session.load(asked_session).pending_question is None
    again = registry.ask(asked_session, {"command": "rm -rf x"}, 60, lambda *_: None, lambda: True)
    assert again.outcome == CANCELLED

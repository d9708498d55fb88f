"""``api.questions``: one registry per kind — answer once, refuse others' and settled ids, settle on the
deadline, an interrupt or a stop — and the durable trace a restart turns into a transcript note."""

from __future__ import annotations

import threading

import pytest

from api import questions
from api.errors import Conflict, NotFound
from api.models import Session
from api.questions import ANSWERED, CANCELLED, STOPPED, TIMEOUT, Questions


def test_an_answer_settles_the_question_once_and_only_for_its_session():
    registry = Questions("approval_id")
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
    registry = Questions("clarify_id")
    registry.open("s1", {"question": "a?"}, timeout_s=60)
    with pytest.raises(Conflict):
        registry.open("s1", {"question": "b?"}, timeout_s=60)
    registry.open("s2", {"question": "c?"}, timeout_s=60)


def test_waiting_ends_on_the_deadline_or_an_interrupt():
    registry = Questions("approval_id")
    expired = registry.wait(registry.open("s1", {}, timeout_s=0.05))
    assert expired.outcome == TIMEOUT and expired.answer is None
    stopped = registry.wait(registry.open("s1", {}, timeout_s=60), interrupted=lambda: True)
    assert stopped.outcome == CANCELLED


def test_a_waiting_question_returns_the_answer_given_from_another_thread():
    registry = Questions("approval_id")
    question = registry.open("s1", {}, timeout_s=60)
    threading.Timer(0.05, registry.answer, args=("s1", question.id, "session")).start()
    assert registry.wait(question).answer == "session"


def test_cancel_settles_only_that_session_and_stop_settles_every_question_now_and_later():
    registry = Questions("approval_id")
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

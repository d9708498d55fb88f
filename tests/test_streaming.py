"""A chat turn in process (scripted agent): write-ahead, journal, checkpoints, final merge, interrupted turns."""

from __future__ import annotations

import errno
import json
import os
import time

import pytest

from api.agent import agent_pool, agent_runtime, agent_turn, interrupted_turns, turn_journal
from api.agent.agent_turn import TurnResult
from api.rules.errors import Conflict, NotFound
from api.services import session_ops, streaming
from api.store import models
from api.store.models import Session
from talaria_testing import scripted_turns
from talaria_testing.faults import FaultInjector


@pytest.fixture
def scripted(state_dir, monkeypatch):
    scripted_turns.install(monkeypatch)
    Session(session_id="chat", title="Untitled", model="fake").save()
    return state_dir


def _wait(turn, timeout=10.0):
    deadline = time.time() + timeout
    while not turn.finished and time.time() < deadline:
        time.sleep(0.01)
    assert turn.finished


def _names(turn):
    return [name for _, name, _ in turn.events]


def test_user_message_is_on_disk_before_the_agent_answers(scripted):
    started = streaming.start_turn("chat", scripted_turns.USER_TEXT)
    on_disk = json.loads((scripted / "chat.json").read_text())
    assert on_disk["messages"][0]["content"] == scripted_turns.USER_TEXT
    assert on_disk["active_stream_id"] == started["stream_id"]
    _wait(turn_journal.get_turn(started["stream_id"]))


def test_turn_journal_numbers_events_and_ends_with_done(scripted):
    turn = turn_journal.get_turn(streaming.start_turn("chat", scripted_turns.USER_TEXT)["stream_id"])
    _wait(turn)
    seqs = [seq for seq, _, _ in turn.events]
    assert seqs == list(range(1, len(seqs) + 1))
    assert _names(turn)[-1] == "done"
    assert "".join(d["text"] for _, n, d in turn.events if n == "token") == scripted_turns.ANSWER
    assert turn.events_after(len(seqs) - 1, 0.01) == ([turn.events[-1]], True)


def test_final_merge_saves_the_answer_once_and_clears_pending_fields(scripted):
    turn = turn_journal.get_turn(streaming.start_turn("chat", scripted_turns.USER_TEXT)["stream_id"])
    _wait(turn)
    loaded = Session.load("chat")
    assert [m["content"] for m in loaded.messages] == [scripted_turns.USER_TEXT, scripted_turns.ANSWER]
    assert not any(m.get("_partial") for m in loaded.messages)
    assert loaded.active_stream_id is None and loaded.pending_user_message is None
    assert loaded.title == scripted_turns.USER_TEXT


def test_partial_answer_is_checkpointed_while_streaming(scripted):
    turn = turn_journal.get_turn(streaming.start_turn("chat", scripted_turns.USER_TEXT)["stream_id"])
    seen_partial = False
    while not turn.finished:
        rows = json.loads((scripted / "chat.json").read_text())["messages"]
        seen_partial = seen_partial or any(m.get("_partial") and m.get("content") for m in rows)
        time.sleep(0.005)
    assert seen_partial


def test_second_turn_while_one_streams_is_409_naming_the_live_turn_and_where_it_may_be(scripted):
    """The refusal said "A reply is still streaming" without saying where, and the page could not offer to
    follow the turn: it names another tab or window and carries the live turn's stream id."""
    turn = turn_journal.get_turn(streaming.start_turn("chat", scripted_turns.USER_TEXT)["stream_id"])
    with pytest.raises(Conflict) as refused:
        streaming.start_turn("chat", "again")
    assert refused.value.payload()["stream_id"] == turn.stream_id
    assert "another tab or window" in refused.value.message
    _wait(turn)


def test_cancel_keeps_the_text_so_far_marked_cancelled(scripted):
    turn = turn_journal.get_turn(streaming.start_turn("chat", scripted_turns.USER_TEXT)["stream_id"])
    while not turn.partial_text:
        time.sleep(0.002)
    streaming.cancel_turn(stream_id=turn.stream_id)
    _wait(turn)
    last = Session.load("chat").messages[-1]
    assert last["_cancelled"] is True and last["content"]
    assert "cancelled" in _names(turn)


def test_a_turn_in_a_session_whose_file_is_a_link_is_refused_as_not_found(scripted, tmp_path):
    """A link where the session file should be raised ValueError (a 500) here."""
    outside = tmp_path / "outside.json"
    outside.write_text('{"session_id": "linked", "messages": []}')
    (scripted / "linked.json").symlink_to(outside)
    with pytest.raises(NotFound):
        streaming.start_turn("linked", "hello")
    assert turn_journal.live_turn_for("linked") is None


def test_cancel_of_an_unknown_stream_is_404(scripted):
    with pytest.raises(NotFound):
        streaming.cancel_turn(stream_id="nope")


def test_pending_turn_left_by_a_dead_process_gets_an_interrupted_marker(state_dir):
    s = Session(session_id="dead", messages=[{"role": "user", "content": "q", "timestamp": 1.0}])
    s.active_stream_id, s.pending_user_message, s.pending_started_at = "gone", "q", 1.0
    s.save()
    models.store().sessions.clear()
    assert interrupted_turns.recover_interrupted_turns(state_dir) == ["dead"]
    rows = Session.load("dead").messages
    assert [m["role"] for m in rows] == ["user", "assistant"]
    assert rows[-1]["_interrupted"] and rows[-1]["_error"]
    assert Session.load("dead").pending_user_message is None


def test_provider_not_configured_ends_the_turn_offering_the_setup_form(state_dir, monkeypatch):
    Session(session_id="np", model="").save()

    def no_provider(*a, **kw):
        raise agent_runtime.ProviderNotConfigured()

    monkeypatch.setattr(agent_runtime, "build_agent", no_provider)
    turn = turn_journal.get_turn(streaming.start_turn("np", "hello")["stream_id"])
    _wait(turn)
    errors = [d for _, n, d in turn.events if n == "error"]
    assert errors and "config.yaml" in errors[0]["message"] and errors[0]["setup"] is True
    row = Session.load("np").messages[-1]
    assert row["_error"] is True and row["_needs_setup"] is True
    assert "```yaml\nmodel:\n  provider: custom\n" in row["content"]  # the example keeps its lines


def test_after_an_agent_exception_the_next_turn_is_sent_without_the_failed_message(scripted, monkeypatch):
    histories = []

    class RaisingOnce(scripted_turns.ScriptedTurnRunner):
        def _run(self):
            histories.append([(m["role"], m["content"]) for m in self.history])
            if len(histories) == 1:
                self.result = TurnResult(failed=True, error="RuntimeError: boom")
                self.done.set()
                return
            super()._run()

    monkeypatch.setattr(agent_turn, "TurnRunner", RaisingOnce)
    first = turn_journal.get_turn(streaming.start_turn("chat", "lost words")["stream_id"])
    _wait(first)
    assert "error" in _names(first)
    second = turn_journal.get_turn(streaming.start_turn("chat", scripted_turns.USER_TEXT)["stream_id"])
    _wait(second)
    assert histories[1] == []  # the failed turn's message is not history
    rows = Session.load("chat").messages
    assert [m["content"] for m in rows if m["role"] == "user"] == ["lost words", scripted_turns.USER_TEXT]
    assert rows[1]["_error"] and rows[-1]["content"] == scripted_turns.ANSWER


def _fail_saves_once_streaming(scripted, err: int = errno.ENOSPC):
    """Start a turn, and from its first streamed token on make every save of the session fail."""
    started = streaming.start_turn("chat", scripted_turns.USER_TEXT)
    turn = turn_journal.get_turn(started["stream_id"])
    while not turn.partial_text:
        time.sleep(0.002)
    return turn, FaultInjector(scripted, err, "open", match=lambda name: name.startswith("chat.json"))


@pytest.mark.parametrize("err", [errno.ENOSPC, errno.EROFS])
def test_a_checkpoint_that_cannot_be_saved_stops_the_turn_and_ends_the_stream_with_error_then_done(
    scripted, err
):
    turn, faults = _fail_saves_once_streaming(scripted, err)
    runner = turn.runner  # a finished turn lets go of it
    with faults:
        _wait(turn)
    assert faults.fired
    names = _names(turn)
    assert names[-2:] == ["error", "done"]
    error = [d for _, n, d in turn.events if n == "error"][0]["message"]
    assert "Saving the conversation failed" in error and os.strerror(err) in error
    # The agent was stopped, not left answering into the void.
    assert runner is not None and runner.done.is_set()
    assert "".join(d["text"] for _, n, d in turn.events if n == "token") != scripted_turns.ANSWER
    again = turn_journal.get_turn(streaming.start_turn("chat", "after the disk came back")["stream_id"])
    _wait(again)  # the agent is free and the session takes a new turn once saving works again
    rows = Session.load("chat").messages
    assert rows[-2]["content"] == "after the disk came back" and rows[-1]["content"] == scripted_turns.ANSWER
    assert [m["content"] for m in rows if m["role"] == "user"] == [
        scripted_turns.USER_TEXT,
        "after the disk came back",
    ]


def test_a_final_save_that_fails_still_ends_the_stream_with_error_then_done(scripted, monkeypatch):
    monkeypatch.setitem(streaming._config.SETTINGS_VALUES, "checkpoint_interval", 60.0)  # no checkpoint
    turn, faults = _fail_saves_once_streaming(scripted)
    with faults:
        _wait(turn)
    assert _names(turn)[-2:] == ["error", "done"]
    assert "Saving the answer failed" in [d for _, n, d in turn.events if n == "error"][-1]["message"]
    on_disk = json.loads((scripted / "chat.json").read_text())
    assert on_disk["messages"][-1]["content"] == scripted_turns.USER_TEXT  # the write-ahead, as it was saved


@pytest.mark.parametrize("edit", ["undo", "retry", "truncate", "clear"])
def test_after_a_failed_final_save_edits_work_once_the_disk_is_back(scripted, monkeypatch, edit):
    """A final save that failed left the file saying the turn was pending, and every edit answered 409
    ("still streaming") until the next chat/start closed it: the turn is closed by the edit instead."""
    monkeypatch.setitem(streaming._config.SETTINGS_VALUES, "checkpoint_interval", 60.0)  # no checkpoint
    turn, faults = _fail_saves_once_streaming(scripted)
    with faults:
        _wait(turn)
    assert json.loads((scripted / "chat.json").read_text())["active_stream_id"] == turn.stream_id
    {
        "undo": lambda: session_ops.undo_last("chat"),
        "retry": lambda: session_ops.retry_last("chat"),
        "truncate": lambda: session_ops.truncate_session("chat", 1),
        "clear": lambda: session_ops.clear_session("chat"),
    }[edit]()
    on_disk = json.loads((scripted / "chat.json").read_text())
    assert on_disk["active_stream_id"] is None and on_disk["pending_user_message"] is None
    assert models.get_session("chat").to_payload() == Session.load("chat").to_payload()
    if edit == "truncate":  # the user row stays; the interrupted marker after it went with the edit
        assert [m["content"] for m in on_disk["messages"]] == [scripted_turns.USER_TEXT]


def test_an_edit_while_a_turn_streams_is_still_refused(scripted):
    turn = turn_journal.get_turn(streaming.start_turn("chat", scripted_turns.USER_TEXT)["stream_id"])
    with pytest.raises(Conflict):
        session_ops.undo_last("chat")
    _wait(turn)


@pytest.mark.parametrize("user_row_saved", [True, False])
def test_a_turn_marked_interrupted_at_startup_keeps_its_pending_attachments_on_the_user_row(
    state_dir, user_row_saved
):
    files = [{"name": "plan.png", "path": "uploads/plan.png", "mime": "image/png"}]
    rows = [{"role": "user", "content": "see the plan", "timestamp": 1.0}] if user_row_saved else []
    s = Session(session_id="att", messages=rows)
    s.active_stream_id, s.pending_user_message, s.pending_started_at = "gone", "see the plan", 1.0
    s.pending_attachments = files
    s.save()
    models.store().sessions.clear()
    assert interrupted_turns.recover_interrupted_turns(state_dir) == ["att"]
    loaded = Session.load("att")
    (user,) = [m for m in loaded.messages if m["role"] == "user"]
    assert user["content"] == "see the plan" and user["attachments"] == files
    assert loaded.pending_attachments == [] and loaded.messages[-1]["_interrupted"]


@pytest.mark.parametrize("err", [errno.ENOSPC, errno.EROFS])
def test_a_write_ahead_that_cannot_be_saved_changes_nothing_and_no_later_save_writes_it(scripted, err):
    before = (scripted / "chat.json").read_bytes()
    faults = FaultInjector(scripted, err, "open", match=lambda name: name.startswith("chat.json"))
    with faults, pytest.raises(OSError):
        streaming.start_turn("chat", "lost to a full disk")
    held = models.get_session("chat")
    assert held.messages == [] and held.active_stream_id is None and held.pending_user_message is None
    assert turn_journal.live_turn_for("chat") is None
    assert (scripted / "chat.json").read_bytes() == before
    held.pinned = True
    held.save()  # a later save of anything (a pin) does not write the lost message
    loaded = Session.load("chat")
    assert loaded.messages == [] and loaded.active_stream_id is None and loaded.pinned


def test_a_stopped_turns_agent_is_closed_not_reused_so_its_late_tokens_reach_no_later_turn(
    scripted, monkeypatch, request
):
    built, closed = [], []

    def build(session_id, *args, **kwargs):
        built.append(scripted_turns.build_agent(session_id))
        return built[-1]

    monkeypatch.setattr(agent_runtime, "build_agent", build)
    monkeypatch.setattr(agent_runtime, "close_agent", closed.append)
    previous = agent_pool.AGENTS.use(agent_pool.IdleAgents())  # no agent left idle by earlier tests
    request.addfinalizer(lambda: agent_pool.AGENTS.use(previous))
    turn = turn_journal.get_turn(streaming.start_turn("chat", "stop me")["stream_id"])
    while not turn.partial_text:
        time.sleep(0.002)
    streaming.cancel_turn(stream_id=turn.stream_id)
    _wait(turn)
    assert closed == built  # the stopped turn's agent
    for text in ("next", "and next"):
        _wait(turn_journal.get_turn(streaming.start_turn("chat", text)["stream_id"]))
    assert len(built) == 2 and closed == built[:1]  # a fresh agent, kept for the turns that followed

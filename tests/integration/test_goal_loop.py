"""The agent's ``/goal`` loop run by the server: the real server, the real hermes-agent (its ``GoalManager``
and judge) and the fake LLM answering both the turns and the judge's requests."""

from __future__ import annotations

import json
import os
import signal
import time

import pytest

from talaria_testing.chat_client import new_session, on_disk, roles_and_text, session
from talaria_testing.fake_llm import Reply, agent_server, echo_reply
from talaria_testing.many_turns import worker_pids
from talaria_testing.server_proc import ServerProc

pytestmark = pytest.mark.integration

GOAL = "Write three steps of the plan"
CONTINUATION_HEAD = "[Continuing toward your standing goal]"
JUDGE_HEAD = "You are a strict judge"


def _judge(verdict: str, reason: str) -> Reply:
    return Reply(text=json.dumps({"verdict": verdict, "reason": reason}))


def _goal(srv: ServerProc, sid: str, args: str) -> dict:
    return srv.post_json("/api/session/goal", {"session_id": sid, "args": args})


def _card(srv: ServerProc, sid: str) -> dict | None:
    return srv.get_json(f"/api/session/goal?session_id={sid}")["goal"]


def _wait_card(srv: ServerProc, sid: str, status: str, timeout: float = 40.0) -> dict:
    """The goal's card once it has ``status`` and no turn runs in the session."""
    deadline = time.monotonic() + timeout
    while True:
        card = _card(srv, sid)
        data = session(srv, sid)
        if card and card["status"] == status and not data["is_streaming"] and not data["queued_messages"]:
            return card
        assert time.monotonic() < deadline, (card, roles_and_text(data["messages"]))
        time.sleep(0.1)


def _is_judge(request: dict) -> bool:
    messages = request["body"].get("messages") or []
    return bool(messages) and str(messages[0].get("content", "")).startswith(JUDGE_HEAD)


def _saved_cards(srv: ServerProc, sid: str) -> list[tuple[int, dict]]:
    rows = on_disk(srv, sid)["messages"]
    return [(i, c) for i, row in enumerate(rows) for c in row.get("work_cards") or [] if c["kind"] == "goal"]


@pytest.fixture(scope="module")
def srv(llm, tmp_path_factory):
    with agent_server(tmp_path_factory.mktemp("goal"), llm.base_url) as server:
        yield server


def test_a_goal_runs_continuation_turns_until_the_judge_says_done_each_judgement_in_a_worker(srv, fake):
    sid = new_session(srv)
    fake.record_callers = True
    fake.script(
        "Step one is written.",
        _judge("continue", "two steps remain"),
        "Step two is written.",
        _judge("continue", "one step remains"),
        "Step three is written; the plan is complete.",
        _judge("done", "all three steps are written"),
    )
    try:
        answer = _goal(srv, sid, GOAL)
        assert answer["stream_id"] and answer["goal"]["status"] == "active"
        assert answer["goal"]["kind"] == "goal" and answer["goal"]["goal"] == GOAL
        card = _wait_card(srv, sid, "done")
        workers = set(worker_pids(srv))
    finally:
        fake.record_callers = False
    assert card["iteration"] == 3 and card["max_turns"] == 20
    assert card["verdict"] == "done" and card["reason"] == "all three steps are written"
    rows = on_disk(srv, sid)["messages"]
    users = [m["content"] for m in rows if m["role"] == "user"]
    assert users[0] == GOAL and len(users) == 3
    assert all(u.startswith(CONTINUATION_HEAD) and GOAL in u for u in users[1:])
    assert [m["content"] for m in rows if m["role"] == "assistant"][-1].startswith("Step three")
    # One card, on the newest answer, as last judged.
    saved = _saved_cards(srv, sid)
    assert len(saved) == 1 and saved[0][0] == len(rows) - 1 and saved[0][1]["status"] == "done"

    # Each model request: a turn holds the transcript so far; each judge call the goal and that turn's answer.
    requests = [r for r in fake.chat_requests() if r["body"].get("messages")]
    judges = [r for r in requests if _is_judge(r)]
    turns = [r for r in requests if not _is_judge(r)]
    assert len(judges) == 3 and len(turns) == 3
    # The judge's model calls leave the server process, as the turns' do.
    assert {r["caller_pid"] for r in requests} <= workers and srv.proc.pid not in workers
    for judge, answered in zip(
        judges, ["Step one is written.", "Step two is written.", "Step three is written"], strict=True
    ):
        prompt = judge["body"]["messages"][-1]["content"]
        assert f"Goal:\n{GOAL}" in prompt and answered in prompt
    last_turn = [m for m in turns[-1]["body"]["messages"] if m["role"] != "system"]
    assert [m["role"] for m in last_turn] == ["user", "assistant", "user", "assistant", "user"]
    assert last_turn[-1]["content"].startswith(CONTINUATION_HEAD)


def test_pause_resume_and_clear_drive_the_loop(srv, fake):
    sid = new_session(srv)
    fake.script(
        "First step.",
        _judge("continue", "more to do"),
        Reply(text="Second step.", hang_after=1),
    )
    _goal(srv, sid, GOAL)
    assert fake.wait_for_hang(20)
    paused = _goal(srv, sid, "pause")
    assert paused["goal"]["status"] == "paused"
    fake.release()
    card = _wait_card(srv, sid, "paused")
    assert card["paused_reason"] == "paused by the person"
    time.sleep(1.0)  # no judge call and no continuation follow a paused goal's turn
    assert len([r for r in fake.chat_requests() if _is_judge(r)]) == 1
    assert not session(srv, sid)["is_streaming"]

    fake.script("Third step, all done.", _judge("done", "finished"))
    resumed = _goal(srv, sid, "resume")
    assert resumed["stream_id"] and resumed["goal"]["status"] == "active"
    assert _wait_card(srv, sid, "done")["reason"] == "finished"

    cleared = _goal(srv, sid, "clear")
    assert cleared["goal"]["status"] == "stopped"
    assert _card(srv, sid)["status"] == "stopped"
    assert [c["status"] for _, c in _saved_cards(srv, sid)] == ["stopped"]
    status, refused = srv.json("POST", "/api/session/goal", {"session_id": sid, "args": "pause"})
    assert status == 409 and "No goal" in refused["error"]


def test_stop_during_a_goal_turn_pauses_the_goal(srv, fake):
    sid = new_session(srv)
    fake.script(Reply(text="Working on it", hang_after=1))
    started = _goal(srv, sid, GOAL)
    assert fake.wait_for_hang(20)
    srv.post_json("/api/chat/cancel", {"stream_id": started["stream_id"]})
    card = _wait_card(srv, sid, "paused")
    assert card["paused_reason"] == "stopped by the person"
    assert not [r for r in fake.chat_requests() if _is_judge(r)]


def test_a_failing_judge_pauses_the_goal_with_its_reason_and_never_loops_on(srv, fake):
    def judge_fails(body: dict) -> Reply:
        messages = body.get("messages") or []
        if messages and str(messages[0].get("content", "")).startswith(JUDGE_HEAD):
            return Reply(status=500, error="judge down")
        return echo_reply(body)

    fake.default_reply = judge_fails
    try:
        sid = new_session(srv)
        _goal(srv, sid, GOAL)
        card = _wait_card(srv, sid, "paused", timeout=120)
    finally:
        fake.default_reply = echo_reply
    assert "judge API unreachable" in card["paused_reason"]
    assert card["reason"].startswith("judge error")
    turns = [m for m in on_disk(srv, sid)["messages"] if m["role"] == "user"]
    assert len(turns) == card["iteration"] < 20


def test_a_worker_killed_while_it_asks_the_judge_pauses_the_goal_saying_so_and_resume_goes_on(srv, fake):
    sid = new_session(srv)
    fake.record_callers = True
    try:
        fake.script("First step.", Reply(text=json.dumps({"verdict": "done", "reason": "late"}), delay=90))
        _goal(srv, sid, GOAL)
        deadline = time.monotonic() + 60  # the judge's answer comes after 90 s: the kill is first
        while not (judges := [r for r in fake.chat_requests() if _is_judge(r)]):
            assert time.monotonic() < deadline, "the judge was never asked"
            time.sleep(0.05)
        os.kill(judges[0]["caller_pid"], signal.SIGKILL)
        card = _wait_card(srv, sid, "paused")
    finally:
        fake.record_callers = False
    assert card["paused_reason"].startswith("the judge could not be asked"), card
    assert [m["content"] for m in on_disk(srv, sid)["messages"] if m["role"] == "assistant"] == [
        "First step."
    ]

    fake.script("Second step.", _judge("done", "both steps are written"))
    assert _goal(srv, sid, "resume")["goal"]["status"] == "active"
    assert _wait_card(srv, sid, "done")["reason"] == "both steps are written"


def test_the_turn_budget_caps_the_loop(llm, fake, tmp_path):
    with agent_server(tmp_path, llm.base_url, extra={"goals": {"max_turns": 2}}) as server:
        sid = new_session(server)
        fake.script("One.", _judge("continue", "go on"), "Two.", _judge("continue", "go on"), "never sent")
        _goal(server, sid, GOAL)
        card = _wait_card(server, sid, "paused")
        assert card["iteration"] == 2 and card["max_turns"] == 2
        assert "turn budget exhausted" in card["paused_reason"]
        assert len([m for m in on_disk(server, sid)["messages"] if m["role"] == "user"]) == 2


def test_a_restart_during_a_goal_turn_pauses_the_goal(llm, fake, tmp_path):
    with agent_server(tmp_path, llm.base_url) as server:
        sid = new_session(server)
        fake.script("Step one.", _judge("continue", "more"), Reply(text="cut", hang_after=1))
        _goal(server, sid, GOAL)
        assert fake.wait_for_hang(20)
        server.kill()
        fake.release()
        server.start()
        card = _wait_card(server, sid, "paused")
        assert card["paused_reason"] == "Talaria restarted during a goal turn"
        rows = on_disk(server, sid)["messages"]
        assert rows[-1].get("_interrupted")
        assert [c["status"] for _, c in _saved_cards(server, sid)] == ["paused"]


def test_bad_goal_requests_get_a_clear_json_error(srv):
    sid = new_session(srv)
    cases = [
        ({"session_id": sid, "args": 7}, 400, "must be a string"),
        ({"session_id": sid, "args": "x" * 20_001}, 400, "too long"),
        ({"session_id": "../../etc", "args": "status"}, 400, "Invalid session_id"),
        ({"session_id": "nosuchsession", "args": "status"}, 404, "No such session"),
        ({"session_id": sid, "args": "resume"}, 409, "No goal"),
    ]
    for body, status, text in cases:
        got, answer = srv.json("POST", "/api/session/goal", body)
        assert (got, text in answer["error"]) == (status, True), (body, answer)
    status, answer = srv.json("GET", "/api/session/goal?session_id=nosuchsession")
    assert status == 404 and answer["error"]
    assert srv.get_json(f"/api/session/goal?session_id={sid}") == {"goal": None}
    assert "No active goal" in srv.post_json("/api/session/goal", {"session_id": sid, "args": ""})["message"]


def test_a_new_goal_replaces_the_paused_one_whose_card_says_stopped(srv, fake):
    sid = new_session(srv)
    fake.script("Started.", _judge("continue", "more"), Reply(text="Second", hang_after=1))
    _goal(srv, sid, GOAL)
    assert fake.wait_for_hang(20)
    _goal(srv, sid, "pause")
    fake.release()
    first = _wait_card(srv, sid, "paused")
    fake.script("The other goal is met.", _judge("done", "met"))
    second = _goal(srv, sid, "Another goal")["goal"]
    assert second["id"] != first["id"]
    _wait_card(srv, sid, "done")
    statuses = {c["goal"]: c["status"] for _, c in _saved_cards(srv, sid)}
    assert statuses == {GOAL: "stopped", "Another goal": "done"}


def test_asking_about_goals_of_a_session_without_one_never_opens_the_agents_store_for_writing(llm, tmp_path):
    """Every turn's end and every goal status built the agent's GoalManager, which opens its state.db for
    writing (creating state.db-wal beside it) even for a session that never had a goal; the route fuzz
    caught the write. Sessions without a goal are now answered from a read-only look."""
    with agent_server(tmp_path, llm.base_url) as srv:
        sid = new_session(srv)
        home = srv.hermes_home
        before = sorted(p.name for p in home.iterdir() if p.name.startswith("state.db"))
        assert "state.db-wal" not in before
        assert srv.get_json(f"/api/session/goal?session_id={sid}") == {"goal": None}
        assert srv.post_json("/api/session/goal", {"session_id": sid, "args": "status"})["goal"] is None
        status, _answer = srv.json("POST", "/api/session/goal", {"session_id": sid, "args": "pause"})
        assert status == 409
        assert sorted(p.name for p in home.iterdir() if p.name.startswith("state.db")) == before

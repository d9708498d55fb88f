"""Queue, steer and interrupt through the real server, the real hermes-agent and the fake LLM.

A turn is held mid-answer by the fake (``hang_after``) while messages are sent to the session; the
fake's request log shows what each model request held.
"""

from __future__ import annotations

import time

import pytest

from api.services.streaming import STEER_QUEUED_TEXT
from talaria_testing.chat_client import (
    SSE,
    assert_settled,
    named,
    new_session,
    on_disk,
    read_all,
    roles_and_text,
    session,
    start,
    tokens_streamed,
)
from talaria_testing.fake_llm import Reply, agent_server
from talaria_testing.server_proc import ServerProc

pytestmark = pytest.mark.integration

TODO_ARGS = {"todos": [{"id": "1", "content": "write the tests", "status": "pending"}]}


def _server(root, base_url: str, toolsets: str = "none") -> ServerProc:
    return agent_server(root, base_url, toolsets=toolsets, env={"TALARIA_CHECKPOINT_INTERVAL": "0.2"})


@pytest.fixture(scope="module")
def srv(llm, tmp_path_factory):
    with _server(tmp_path_factory.mktemp("queue"), llm.base_url) as server:
        yield server


@pytest.fixture(scope="module")
def tool_srv(llm, tmp_path_factory):
    with _server(tmp_path_factory.mktemp("queue_tools"), llm.base_url, toolsets="todo") as server:
        yield server


def _send(srv: ServerProc, sid: str, message: str, mode: str = "queue") -> dict:
    return srv.post_json("/api/session/queue", {"session_id": sid, "message": message, "mode": mode})


def _settled_with(srv: ServerProc, sid: str, count: int, timeout: float = 30.0) -> dict:
    """The session once it holds ``count`` messages, no turn runs and nothing waits in its queue."""
    deadline = time.monotonic() + timeout
    while True:
        data = session(srv, sid)
        if len(data["messages"]) >= count and not data["is_streaming"] and not data["queued_messages"]:
            return data
        assert time.monotonic() < deadline, roles_and_text(data["messages"])
        time.sleep(0.1)


def _users_sent(request: dict) -> list[str]:
    return [m["content"] for m in request["body"]["messages"] if m["role"] == "user"]


def _hold_a_turn(srv: ServerProc, fake, sid: str, text: str = "one") -> str:
    stream_id = start(srv, sid, text)
    assert fake.wait_for_hang(60)
    return stream_id


def test_two_messages_sent_during_a_turn_wait_in_the_file_then_run_in_order_after_it(srv, fake):
    sid = new_session(srv)
    fake.script(
        Reply(text="first answer", hang_after=1), Reply(text="second answer"), Reply(text="third answer")
    )
    _hold_a_turn(srv, fake, sid)
    two, three = _send(srv, sid, "two"), _send(srv, sid, "three")
    assert two["mode"] == "queue" and "stream_id" not in two
    assert [item["text"] for item in three["queue"]] == ["two", "three"]
    assert [item["text"] for item in on_disk(srv, sid)["queued_messages"]] == ["two", "three"]
    fake.release()
    data = _settled_with(srv, sid, 6)
    assert roles_and_text(data["messages"]) == [
        ("user", "one"),
        ("assistant", "first answer"),
        ("user", "two"),
        ("assistant", "second answer"),
        ("user", "three"),
        ("assistant", "third answer"),
    ]
    assert_settled(data)
    requests = fake.chat_requests()
    assert [_users_sent(r) for r in requests] == [["one"], ["one", "two"], ["one", "two", "three"]]
    assert [m["content"] for m in requests[2]["body"]["messages"] if m["role"] == "assistant"] == [
        "first answer",
        "second answer",
    ]
    assert "queued_messages" not in on_disk(srv, sid)


def test_a_queued_message_is_edited_or_cancelled_before_it_runs(srv, fake):
    sid = new_session(srv)
    fake.script(Reply(text="held answer", hang_after=1), Reply(text="edited answer"))
    _hold_a_turn(srv, fake, sid)
    first, second = _send(srv, sid, "draft"), _send(srv, sid, "never mind")
    edited = srv.post_json(
        "/api/session/queue/edit",
        {"session_id": sid, "queue_id": first["queued"]["id"], "message": "final words"},
    )
    assert [item["text"] for item in edited["queue"]] == ["final words", "never mind"]
    cancelled = srv.post_json(
        "/api/session/queue/cancel", {"session_id": sid, "queue_id": second["queued"]["id"]}
    )
    assert [item["text"] for item in cancelled["queue"]] == ["final words"]
    fake.release()
    data = _settled_with(srv, sid, 4)
    assert roles_and_text(data["messages"]) == [
        ("user", "one"),
        ("assistant", "held answer"),
        ("user", "final words"),
        ("assistant", "edited answer"),
    ]
    status, body = srv.json("POST", "/api/session/queue/cancel", {"session_id": sid, "queue_id": "gone"})
    assert status == 404 and "queued" in body["error"]


def test_bad_queue_requests_get_a_clear_error_and_change_nothing(srv, fake):
    sid = new_session(srv)
    for body, code in [
        ({"session_id": sid, "message": "x", "mode": "shout"}, 400),
        ({"session_id": sid, "message": 5}, 400),
        ({"session_id": sid, "message": "   "}, 400),
        ({"session_id": "../etc", "message": "x"}, 400),
        ({"session_id": sid, "message": "x", "attachments": ["../../etc/passwd"]}, 403),
        ({"session_id": "no-such-session", "message": "x"}, 404),
    ]:
        status, answer = srv.json("POST", "/api/session/queue", body)
        assert status == code and isinstance(answer["error"], str), (body, status, answer)
    status, answer = srv.json(
        "POST", "/api/session/queue/edit", {"session_id": sid, "queue_id": "x", "message": 3}
    )
    assert status == 400 and answer["error"]
    assert on_disk(srv, sid)["messages"] == [] and "queued_messages" not in on_disk(srv, sid)


def test_a_message_sent_to_an_idle_session_through_the_queue_starts_at_once(srv, fake):
    sid = new_session(srv)
    fake.script(Reply(text="straight away"))
    answer = _send(srv, sid, "now please")
    assert answer["stream_id"] and answer["queue"] == []
    events = read_all(srv, answer["stream_id"])
    assert named(events, "done")[0]["session"]["messages"][-1]["content"] == "straight away"


def test_a_steer_reaches_the_next_model_request_of_the_same_turn_and_is_saved_once(tool_srv, fake):
    sid = new_session(tool_srv)
    fake.script(
        Reply(
            text="Let me plan.",
            tool_calls=[{"id": "call_s1", "name": "todo", "arguments": TODO_ARGS}],
            hang_after=1,
        ),
        Reply(text="Planned, focusing on tests."),
    )
    stream_id = _hold_a_turn(tool_srv, fake, sid, "plan my day")
    answer = _send(tool_srv, sid, "focus on the tests", "steer")
    assert answer["mode"] == "steer" and answer["steered"] is True and answer["stream_id"] == stream_id
    fake.release()
    events = read_all(tool_srv, stream_id)
    assert named(events, "steer") == [{"text": "focus on the tests"}]
    data = _settled_with(tool_srv, sid, 4)
    requests = fake.chat_requests()
    assert len(requests) == 2  # the steer went into the turn, not a turn of its own
    tool_rows = [m for m in requests[1]["body"]["messages"] if m["role"] == "tool"]
    assert "focus on the tests" in tool_rows[-1]["content"]
    assert [m["role"] for m in data["messages"]] == ["user", "assistant", "tool", "assistant"]
    saved = on_disk(tool_srv, sid)
    assert sum(str(m.get("content")).count("focus on the tests") for m in saved["messages"]) == 1
    assert "focus on the tests" in saved["messages"][2]["content"]


def test_a_steer_the_turn_ends_before_reading_runs_as_the_next_message(srv, fake):
    sid = new_session(srv)
    fake.script(Reply(text="quick answer", hang_after=1), Reply(text="about the steer"))
    stream_id = _hold_a_turn(srv, fake, sid)
    assert _send(srv, sid, "and also this", "steer")["steered"] is True
    fake.release()
    events = read_all(srv, stream_id)
    assert {"kind": "info", "message": STEER_QUEUED_TEXT} in named(events, "status")
    data = _settled_with(srv, sid, 4)
    assert roles_and_text(data["messages"]) == [
        ("user", "one"),
        ("assistant", "quick answer"),
        ("user", "and also this"),
        ("assistant", "about the steer"),
    ]
    assert [_users_sent(r) for r in fake.chat_requests()] == [["one"], ["one", "and also this"]]


def test_interrupt_stops_the_turn_keeping_what_streamed_and_sends_the_message_next(srv, fake):
    sid = new_session(srv)
    fake.script(Reply(text="alpha beta gamma delta", hang_after=2), Reply(text="changed course"))
    stream_id = start(srv, sid, "long task")
    with SSE(srv, stream_id) as sse:
        seen, answer = [], None
        for event in sse:
            seen.append(event)
            if tokens_streamed(seen) == 2 and answer is None:
                assert fake.wait_for_hang(60)
                answer = _send(srv, sid, "stop, do this instead", "interrupt")
                assert answer["mode"] == "interrupt" and [i["text"] for i in answer["queue"]] == [
                    "stop, do this instead"
                ]
    assert "cancelled" in [name for _, name, _ in seen]
    data = _settled_with(srv, sid, 4)
    rows = data["messages"]
    assert roles_and_text(rows)[0] == ("user", "long task")
    assert (
        rows[1]["role"] == "assistant"
        and rows[1]["content"].rstrip() == "alpha beta"
        and rows[1]["_cancelled"]
    )
    assert roles_and_text(rows[2:]) == [("user", "stop, do this instead"), ("assistant", "changed course")]
    assert _users_sent(fake.chat_requests()[-1])[-1] == "stop, do this instead"


def test_a_queued_message_left_by_a_killed_server_runs_when_it_starts_again(fake, tmp_path):
    srv = _server(tmp_path, fake.base_url).start()
    try:
        sid = new_session(srv)
        fake.script(Reply(text="cut short by the kill", hang_after=2))
        _hold_a_turn(srv, fake, sid, "before the crash")
        _send(srv, sid, "after the restart")
        assert [i["text"] for i in on_disk(srv, sid)["queued_messages"]] == ["after the restart"]
        srv.kill()
        fake.release()
        fake.reset()
        fake.script(Reply(text="ran after the restart"))
        srv.start()
        data = _settled_with(srv, sid, 4)
        rows = data["messages"]
        assert rows[0]["content"] == "before the crash"
        assert any(m.get("_interrupted") for m in rows)
        assert roles_and_text(rows[-2:]) == [
            ("user", "after the restart"),
            ("assistant", "ran after the restart"),
        ]
        assert _users_sent(fake.chat_requests()[-1])[-1] == "after the restart"
    finally:
        srv.stop()


def test_a_queued_message_that_cannot_start_waits_with_the_reason_until_edited(srv, fake):
    folder = srv.root / "queue-workspace"
    folder.mkdir()
    sid = new_session(srv)
    srv.post_json("/api/session/workspace", {"session_id": sid, "workspace": str(folder)})
    fake.script(Reply(text="held answer", hang_after=1), Reply(text="after the fix"))
    _hold_a_turn(srv, fake, sid)
    item = _send(srv, sid, "needs the folder")["queued"]
    folder.rmdir()  # the workspace is gone when the queued message's turn would start
    fake.release()
    deadline = time.monotonic() + 30
    while not (waiting := session(srv, sid)["queued_messages"]) or "error" not in waiting[0]:
        assert time.monotonic() < deadline, waiting
        time.sleep(0.1)
    assert waiting[0]["id"] == item["id"] and "workspace" in waiting[0]["error"].lower()
    assert [m["content"] for m in session(srv, sid)["messages"] if m["role"] == "user"] == ["one"]
    folder.mkdir()
    edited = srv.post_json(
        "/api/session/queue/edit",
        {"session_id": sid, "queue_id": item["id"], "message": "needs the folder, again"},
    )
    assert edited["stream_id"] and edited["queue"] == []
    data = _settled_with(srv, sid, 4)
    assert roles_and_text(data["messages"])[2:] == [
        ("user", "needs the folder, again"),
        ("assistant", "after the fix"),
    ]

"""Every way a turn can end, then more turns: each later turn is saved whole and the model's next request holds it.

The real server and the real hermes-agent run against the fake LLM; the fake's request log is what the
model was sent. ``talaria_testing.turn_outcomes`` drives each outcome and says what it must leave behind.
"""

from __future__ import annotations

import json

import pytest

from talaria_testing.chat_client import (
    SSE,
    assert_settled,
    assert_well_formed,
    named,
    names,
    new_session,
    on_disk,
    read_all,
    session,
    start,
)
from talaria_testing.fake_llm import Reply, agent_server
from talaria_testing.faults import fill, small_tmpfs
from talaria_testing.server_proc import ServerProc
from talaria_testing.turn_outcomes import (
    AGENT_CONFIG,
    KINDS,
    SERVER_ENV,
    drive,
    expected,
    expected_killed,
    kill_mid_turn,
    project,
    turn_request,
)

pytestmark = pytest.mark.integration


def _server(root, base_url: str, extra: dict | None = None) -> ServerProc:
    return agent_server(root, base_url, env=SERVER_ENV, extra={**AGENT_CONFIG, **(extra or {})})


@pytest.fixture(scope="module")
def srv(llm, tmp_path_factory):
    with _server(tmp_path_factory.mktemp("outcomes"), llm.base_url) as server:
        yield server


def sent_rows(fake, text: str) -> list[tuple]:
    """The first model request of the turn that sent ``text``, projected (the system prompt left out)."""
    request = turn_request(fake.chat_requests(), text)
    return [project(m) for m in request["body"]["messages"] if m["role"] != "system"]


def file_rows(srv: ServerProc, sid: str) -> list[tuple]:
    return [project(m) for m in on_disk(srv, sid)["messages"]]


def _follow_up_turns(srv: ServerProc, fake, sid: str, before: list, model_before: list) -> None:
    """A tool turn, then an answer: both saved whole, in order, and each sent to the model in full."""
    fake.reset()
    events = drive(srv, fake, sid, "tool", "fresh words", "t2")
    assert_well_formed(events) and "error" not in names(events)
    second = expected("tool", "fresh words", "t2")
    assert sent_rows(fake, "fresh words") == [*model_before, ("user", "fresh words")]  # nothing glued onto it
    assert file_rows(srv, sid) == [*before, *second.transcript]
    fake.reset()
    events = drive(srv, fake, sid, "answer", "third words", "t3")
    assert "error" not in names(events)
    third = expected("answer", "third words", "t3")
    assert sent_rows(fake, "third words") == [*model_before, *second.model, ("user", "third words")]
    assert file_rows(srv, sid) == [*before, *second.transcript, *third.transcript]
    saved = on_disk(srv, sid)["messages"]
    assert saved[-1].get("reasoning") == "thinking t3"  # the answer's reasoning is saved with it
    assert_settled(session(srv, sid), partial_ok=True)  # a killed turn keeps its checkpoint


@pytest.mark.parametrize("kind", KINDS)
def test_after_any_outcome_later_turns_are_saved_whole_and_reach_the_model(srv, fake, kind):
    sid = new_session(srv)
    events = drive(srv, fake, sid, kind, "lost words", "t1")
    assert_well_formed(events)
    first = expected(kind, "lost words", "t1")
    assert file_rows(srv, sid) == first.transcript
    if ("error", False) in first.transcript:
        assert names(events).index("error") < names(events).index("done")
    _follow_up_turns(srv, fake, sid, first.transcript, first.model)


def test_a_failed_turn_keeps_its_user_message_and_error_after_a_restart(srv, fake):
    sid = new_session(srv)
    drive(srv, fake, sid, "provider_401", "lost words", "t1")
    srv.stop()
    srv.start()
    rows = on_disk(srv, sid)["messages"]
    assert [project(m) for m in rows] == [("user", "lost words"), ("error", False)]
    assert "refused t1" in rows[1]["content"]
    _follow_up_turns(srv, fake, sid, [("user", "lost words"), ("error", False)], [])


def test_a_timed_out_turn_is_a_failed_turn(fake, tmp_path):
    slow = {"providers": {"custom": {"request_timeout_seconds": 1, "stale_timeout_seconds": 1}}}
    srv = _server(tmp_path, fake.base_url, extra=slow).start()
    try:
        sid = new_session(srv)
        fake.script(*[Reply(text="too late", delay=3)] * 3)
        events = drive(srv, fake, sid, "answer", "lost words", "t0")  # its scripted answer is never reached
        (error,) = named(events, "error")
        assert "timed out" in error["message"].lower()
        fake.reset()
        _follow_up_turns(srv, fake, sid, [("user", "lost words"), ("error", False)], [])
    finally:
        srv.stop()


@pytest.mark.parametrize("tokens", [0, 2])
def test_a_server_killed_mid_turn_leaves_the_turn_interrupted_and_later_turns_whole(fake, tmp_path, tokens):
    srv = _server(tmp_path, fake.base_url).start()
    try:
        sid = new_session(srv)
        kill_mid_turn(srv, fake, sid, "lost words", "t1", tokens)
        first = expected_killed("lost words", "t1", tokens)
        assert file_rows(srv, sid) == first.transcript
        _follow_up_turns(srv, fake, sid, first.transcript, first.model)
    finally:
        srv.stop()


def test_a_full_disk_mid_turn_stops_the_turn_and_the_next_turn_works_once_there_is_room(fake, tmp_path):
    srv = _server(tmp_path, fake.base_url)
    with small_tmpfs(srv.state_dir, "4m") as mounted:
        if mounted is None:
            pytest.skip("mounting a tmpfs is not permitted here (test_streaming injects the same fault)")
        srv.start()
        try:
            sid = new_session(srv)
            words = " ".join(f"w{i}" for i in range(400))
            fake.script(Reply(text=words, token_delay=0.02, for_user="lost words"))
            events, filler = [], None
            with SSE(srv, start(srv, sid, "lost words"), timeout=60) as sse:
                for event in sse:
                    events.append(event)
                    if event[1] == "token" and filler is None:
                        filler = fill(srv.state_dir)
            assert names(events)[-2:] == ["error", "done"]
            assert "No space left on device" in named(events, "error")[0]["message"]
            streamed = "".join(d["text"] for d in named(events, "token"))
            assert len(streamed) < len(words)  # the agent was stopped, not left answering
            status, answer = srv.json(
                "POST", "/api/chat/start", {"session_id": sid, "message": "refused words"}
            )
            assert status == 507 and "disk is full" in answer["error"]
            shown = session(srv, sid)
            shown_rows = [
                {k: v for k, v in m.items() if k not in ("html", "_idx")} for m in shown["messages"]
            ]
            assert shown_rows == on_disk(srv, sid)["messages"]  # memory is what the file holds
            filler.unlink()
            srv.post_json("/api/session/pin", {"session_id": sid, "pinned": True})
            assert "refused words" not in json.dumps(on_disk(srv, sid))
            # An edit is not refused as "still streaming": it closes the turn the failed save left pending.
            kept = len(on_disk(srv, sid)["messages"])
            status, answer = srv.json(
                "POST", "/api/session/truncate", {"session_id": sid, "keep_count": kept}
            )
            assert status == 200, answer
            assert on_disk(srv, sid)["active_stream_id"] is None
            _follow_up_turns_after_a_lost_turn(srv, fake, sid)
        finally:
            srv.stop()


def _follow_up_turns_after_a_lost_turn(srv: ServerProc, fake, sid: str) -> None:
    fake.reset()
    events = drive(srv, fake, sid, "answer", "after the disk came back", "t2")
    assert "error" not in names(events)
    rows = on_disk(srv, sid)["messages"]
    assert [m["content"] for m in rows if m["role"] == "user"] == ["lost words", "after the disk came back"]
    assert project(rows[-1]) == ("assistant", "answer t2.", ())
    assert_settled(session(srv, sid), partial_ok=True)


def test_lone_surrogates_from_the_model_typed_text_or_an_import_become_u_fffd_and_streams_survive(srv, fake):
    sid = new_session(srv)
    fake.script(Reply(text="half \ud83d of a pair", reasoning="think \udc00 hard", for_user="hello"))
    stream_id = start(srv, sid, "hello")
    events = read_all(srv, stream_id)
    assert_well_formed(events) and "error" not in names(events)
    assert "".join(d["text"] for d in named(events, "token")) == "half \ufffd of a pair"
    assert read_all(srv, stream_id, last_event_id=1) == events[1:]  # a reconnect replays it too
    fake.script(Reply(text="fine", for_user="typed \ufffd text"))
    assert "error" not in names(read_all(srv, start(srv, sid, "typed \ud800 text")))
    rows = json.loads((srv.session_dir / f"{sid}.json").read_bytes().decode("utf-8"))["messages"]
    assert [m["content"] for m in rows] == ["hello", "half \ufffd of a pair", "typed \ufffd text", "fine"]
    assert rows[1]["reasoning"] == "think \ufffd hard"
    imported = srv.post_json(
        "/api/session/import", {"title": "t\udc00", "messages": [{"role": "user", "content": "a \udfff b"}]}
    )["session"]
    again = session(srv, imported["session_id"])
    assert again["title"] == "t\ufffd" and again["messages"][0]["content"] == "a \ufffd b"


def test_in_a_compressed_session_a_killed_turns_checkpoint_still_reaches_the_model(fake, tmp_path):
    srv = _server(tmp_path, fake.base_url).start()
    try:
        sid = new_session(srv)
        for i in range(4):
            drive(srv, fake, sid, "answer", f"warm-up {i}", f"w{i}")
            fake.reset()
        assert srv.post_json("/api/session/compress", {"session_id": sid})["changed"]
        kill_mid_turn(srv, fake, sid, "lost words", "t1", 2)
        events = drive(srv, fake, sid, "answer", "fresh words", "t2")
        assert "error" not in names(events)
        sent = sent_rows(fake, "fresh words")
        assert sent[-3:] == [
            ("user", "lost words"),
            ("assistant", "t1-w0 t1-w1", ()),
            ("user", "fresh words"),
        ]
    finally:
        srv.stop()

"""A session's unsent draft on the server (hermes-webui's ``/api/session/draft``): kept durably in the file's
``composer_draft``, not activity (the sidebar order stays), bounded, refused clearly, cleared by sending."""

from __future__ import annotations

import pytest

from talaria_testing.chat_client import chat, new_session, on_disk
from talaria_testing.fake_llm import Reply, agent_server

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def srv(llm, tmp_path_factory):
    with agent_server(tmp_path_factory.mktemp("drafts"), llm.base_url) as server:
        yield server


def _draft(srv, sid: str) -> dict:
    return srv.get_json(f"/api/session/draft?session_id={sid}")


def _order(srv) -> list[str]:
    return [row["session_id"] for row in srv.get_json("/api/sessions")["sessions"]]


def test_a_draft_is_kept_in_the_session_file_without_moving_the_session_in_the_sidebar(srv):
    older = new_session(srv)
    newer = new_session(srv)
    before = on_disk(srv, older)
    order = _order(srv)
    assert order.index(newer) < order.index(older)
    saved = srv.post_json("/api/session/draft", {"session_id": older, "text": "half a thought ✍"})
    assert saved["session_id"] == older and saved["text"] == "half a thought ✍"
    assert _draft(srv, older)["text"] == "half a thought ✍"
    after = on_disk(srv, older)
    assert after["composer_draft"]["text"] == "half a thought ✍"
    assert after["updated_at"] == before["updated_at"]
    assert _order(srv) == order
    assert (
        srv.get_json(f"/api/session?session_id={older}")["session"]["composer_draft"]["text"]
        == "half a thought ✍"
    )
    srv.post_json("/api/session/draft", {"session_id": older, "text": ""})
    assert _draft(srv, older) == {"session_id": older, "text": "", "updated_at": None}
    assert on_disk(srv, older)["composer_draft"] == {}


def test_a_session_without_a_draft_answers_an_empty_one(srv):
    sid = new_session(srv)
    assert _draft(srv, sid) == {"session_id": sid, "text": "", "updated_at": None}


@pytest.mark.parametrize(
    ("method", "path", "body", "status"),
    [
        ("POST", "/api/session/draft", {"session_id": "SID", "text": 42}, 400),
        ("POST", "/api/session/draft", {"session_id": "SID", "text": None}, 400),
        ("POST", "/api/session/draft", {"session_id": "SID", "text": ["a"]}, 400),
        ("POST", "/api/session/draft", {"session_id": "../../etc/passwd", "text": "x"}, 400),
        ("POST", "/api/session/draft", {"session_id": 7, "text": "x"}, 400),
        ("POST", "/api/session/draft", {"session_id": "nosuchsession", "text": "x"}, 404),
        ("POST", "/api/session/draft", b'{"session_id": "SID", "text": ', 400),
        ("POST", "/api/session/draft", b"[1, 2]", 400),
        ("GET", "/api/session/draft?session_id=..%2F..%2Fx", None, 400),
        ("GET", "/api/session/draft", None, 400),
        ("GET", "/api/session/draft?session_id=nosuchsession", None, 404),
    ],
)
def test_bad_draft_requests_get_a_clear_error_and_change_nothing(srv, method, path, body, status):
    sid = new_session(srv)
    srv.post_json("/api/session/draft", {"session_id": sid, "text": "keep me"})
    before = on_disk(srv, sid)
    if isinstance(body, dict):
        body = {k: (sid if v == "SID" else v) for k, v in body.items()}
    elif isinstance(body, bytes):
        body = body.replace(b"SID", sid.encode())
    headers = {"Content-Type": "application/json"} if isinstance(body, bytes) else None
    got, data = srv.json(method, path, body, headers)
    assert got == status and isinstance(data["error"], str) and data["error"]
    assert on_disk(srv, sid) == before


def test_a_draft_over_the_limit_is_refused_with_413_and_one_at_the_limit_is_kept(srv):
    sid = new_session(srv)
    got, data = srv.json("POST", "/api/session/draft", {"session_id": sid, "text": "x" * (200 * 1024 + 1)})
    assert got == 413 and "too long" in data["error"]
    assert "text" not in (on_disk(srv, sid).get("composer_draft") or {})
    assert srv.post_json("/api/session/draft", {"session_id": sid, "text": "é" * (100 * 1024)})["text"]


def test_a_draft_survives_a_restart(llm, tmp_path):
    with agent_server(tmp_path, llm.base_url) as server:
        sid = new_session(server)
        server.post_json("/api/session/draft", {"session_id": sid, "text": "after the restart"})
        server.restart()
        assert _draft(server, sid)["text"] == "after the restart"


def test_sending_a_message_clears_the_draft(srv, fake):
    sid = new_session(srv)
    srv.post_json("/api/session/draft", {"session_id": sid, "text": "hello there"})
    fake.script(Reply(text="Hi."))
    chat(srv, sid, "hello there")
    assert _draft(srv, sid)["text"] == ""
    assert on_disk(srv, sid)["composer_draft"] == {}

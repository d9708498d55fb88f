"""Message versions end to end: the real server, the real hermes-agent (with its own state.db), a fake LLM.

An edit or a regeneration keeps the earlier rows as a version; switching shows another version, and the
model is sent the version shown, also after a restart. Undo and clear take versions away for good.
"""

from __future__ import annotations

import pytest

from talaria_testing.chat_client import chat, new_session, on_disk, roles_and_text, session
from talaria_testing.fake_llm import Reply, agent_server

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def srv(llm, tmp_path_factory):
    with agent_server(tmp_path_factory.mktemp("versions"), llm.base_url) as server:
        yield server


def _sent(fake) -> list[tuple[str, str]]:
    """The conversation the model was sent in the last chat request (without the system prompt)."""
    return roles_and_text([m for m in fake.chat_requests()[-1]["body"]["messages"] if m["role"] != "system"])


def _switch(srv, sid: str, index: int, version: int) -> dict:
    body = {"session_id": sid, "message_index": index, "version": version}
    return srv.post_json("/api/session/version", body)["session"]


def _edited_session(srv, fake) -> str:
    """q1/a1, then q2 answered twice: first "answer two", then (edited to "q2 edited") "answer edited"."""
    sid = new_session(srv)
    fake.script(Reply(text="answer one"), Reply(text="answer two"), Reply(text="answer edited"))
    chat(srv, sid, "q1")
    chat(srv, sid, "q2")
    srv.post_json("/api/session/truncate", {"session_id": sid, "keep_count": 2})
    chat(srv, sid, "q2 edited")
    return sid


V1 = [("user", "q1"), ("assistant", "answer one"), ("user", "q2"), ("assistant", "answer two")]
V2 = [("user", "q1"), ("assistant", "answer one"), ("user", "q2 edited"), ("assistant", "answer edited")]


def test_an_edit_keeps_the_earlier_version_and_the_model_follows_the_version_shown(srv, fake):
    sid = _edited_session(srv, fake)
    data = session(srv, sid)
    assert roles_and_text(data["messages"]) == V2
    assert data["message_versions"] == [{"index": 2, "count": 2, "current": 1}]
    listed = srv.get_json(f"/api/session/versions?session_id={sid}&message_index=2")
    assert [(v["version"], v["current"], v["user_text"], v["answer_text"]) for v in listed["versions"]] == [
        (0, False, "q2", "answer two"),
        (1, True, "q2 edited", "answer edited"),
    ]

    shown = _switch(srv, sid, 2, 0)
    assert roles_and_text(shown["messages"]) == V1
    assert shown["message_versions"] == [{"index": 2, "count": 2, "current": 0}]
    fake.script(Reply(text="answer three"))
    chat(srv, sid, "q3")
    assert _sent(fake) == [*V1, ("user", "q3")]  # the edited turn's rows stay out of the model's context

    shown = _switch(srv, sid, 2, 1)
    assert roles_and_text(shown["messages"]) == V2
    fake.script(Reply(text="answer four"))
    chat(srv, sid, "q4")
    assert _sent(fake) == [*V2, ("user", "q4")]


def test_the_version_last_chosen_is_shown_and_sent_after_a_restart(srv, fake):
    sid = _edited_session(srv, fake)
    _switch(srv, sid, 2, 0)
    srv.restart()
    data = session(srv, sid)
    assert roles_and_text(data["messages"]) == V1
    assert data["message_versions"] == [{"index": 2, "count": 2, "current": 0}]
    fake.script(Reply(text="after restart"))
    chat(srv, sid, "q3")
    assert _sent(fake) == [*V1, ("user", "q3")]
    assert roles_and_text(_switch(srv, sid, 2, 1)["messages"]) == V2


def test_a_regenerated_answer_keeps_the_earlier_answer_as_a_version(srv, fake):
    sid = new_session(srv)
    fake.script(Reply(text="first try"), Reply(text="second try"))
    chat(srv, sid, "hello")
    retried = srv.post_json("/api/session/retry", {"session_id": sid})
    chat(srv, sid, retried["last_user_text"])
    assert session(srv, sid)["message_versions"] == [{"index": 0, "count": 2, "current": 1}]
    assert roles_and_text(_switch(srv, sid, 0, 0)["messages"]) == [
        ("user", "hello"),
        ("assistant", "first try"),
    ]
    fake.script(Reply(text="next"))
    chat(srv, sid, "and then?")
    assert _sent(fake) == [("user", "hello"), ("assistant", "first try"), ("user", "and then?")]


def test_after_a_clear_no_version_brings_the_cleared_messages_back(srv, fake):
    sid = _edited_session(srv, fake)
    srv.post_json("/api/session/clear", {"session_id": sid})
    assert session(srv, sid)["message_versions"] == []
    assert list(srv.session_dir.glob(f"{sid}.json.version-*")) == []
    status, data = srv.json(
        "POST", "/api/session/version", {"session_id": sid, "message_index": 2, "version": 0}
    )
    assert status == 400 and "no other versions" in data["error"]
    fake.script(Reply(text="fresh"))
    chat(srv, sid, "start again")
    assert _sent(fake) == [("user", "start again")]


def test_an_undo_of_the_edited_turn_drops_its_versions(srv, fake):
    sid = _edited_session(srv, fake)
    srv.post_json("/api/session/undo", {"session_id": sid})
    data = session(srv, sid)
    assert roles_and_text(data["messages"]) == V1[:2]
    assert data["message_versions"] == []
    assert list(srv.session_dir.glob(f"{sid}.json.version-*")) == []
    assert "message_versions" not in on_disk(srv, sid)


def test_an_edit_inside_a_version_keeps_the_versions_after_it_with_their_tail(srv, fake):
    """Editing q1 puts the whole tail aside, q2's versions included; switching back brings them again."""
    sid = _edited_session(srv, fake)
    srv.post_json("/api/session/truncate", {"session_id": sid, "keep_count": 0})
    fake.script(Reply(text="other start"))
    chat(srv, sid, "q1 again")
    assert session(srv, sid)["message_versions"] == [{"index": 0, "count": 2, "current": 1}]
    shown = _switch(srv, sid, 0, 0)
    assert roles_and_text(shown["messages"]) == V2
    assert shown["message_versions"] == [
        {"index": 0, "count": 2, "current": 0},
        {"index": 2, "count": 2, "current": 1},
    ]
    assert roles_and_text(_switch(srv, sid, 2, 0)["messages"]) == V1


BAD_SWITCHES = [
    ({"message_index": "two", "version": 0}, 400, "message_index"),
    ({"message_index": -1, "version": 0}, 400, "message_index"),
    ({"message_index": 1, "version": 0}, 400, "no other versions"),
    ({"message_index": 2, "version": 5}, 400, "version must be"),
    ({"message_index": 2, "version": True}, 400, "version must be"),
    ({"message_index": 2, "version": 1}, 409, "already shown"),
]


@pytest.mark.parametrize(("fields", "status", "words"), BAD_SWITCHES)
def test_a_bad_version_switch_is_refused_with_a_clear_error_and_changes_nothing(
    srv, fake, fields, status, words
):
    sid = _edited_session(srv, fake)
    before = on_disk(srv, sid)
    got, data = srv.json("POST", "/api/session/version", {"session_id": sid, **fields})
    assert got == status and words in data["error"]
    assert on_disk(srv, sid) == before


def test_versions_of_an_unknown_or_hostile_session_id_are_refused(srv):
    assert srv.json("GET", "/api/session/versions?session_id=nope&message_index=0")[0] == 404
    status, data = srv.json("GET", "/api/session/versions?session_id=..%2Fetc&message_index=0")
    assert status == 400 and "error" in data
    status, _ = srv.json(
        "POST", "/api/session/version", {"session_id": "../x", "message_index": 0, "version": 0}
    )
    assert status == 400


def test_a_deleted_session_takes_its_versions_to_the_trash_and_back(srv, fake):
    sid = _edited_session(srv, fake)
    token = srv.post_json("/api/session/delete", {"session_id": sid})["undo_token"]
    assert list(srv.session_dir.glob(f"{sid}.json*")) == []
    srv.post_json("/api/session/restore-deleted", {"undo_token": token})
    assert roles_and_text(_switch(srv, sid, 2, 0)["messages"]) == V1

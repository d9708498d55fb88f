"""The agent's memory through the page while the real agent writes it: the real server and agent, the fake
LLM calling the agent's memory tool, the page's write racing it."""

from __future__ import annotations

import pytest

from talaria_testing.chat_client import chat, new_session, on_disk, text_of
from talaria_testing.fake_llm import Reply, agent_server

pytestmark = pytest.mark.integration

MEMORY_ON = {"memory": {"memory_enabled": True, "user_profile_enabled": True}}


@pytest.fixture(scope="module")
def srv(llm, tmp_path_factory):
    server = agent_server(tmp_path_factory.mktemp("memory"), llm.base_url, toolsets="memory", extra=MEMORY_ON)
    with server:
        yield server


def _file(srv, target: str) -> dict:
    return next(row for row in srv.get_json("/api/memory")["files"] if row["target"] == target)


def test_an_edit_from_before_the_agents_write_gets_409_with_both_versions_and_loses_nothing(srv, llm):
    read_by_page = _file(srv, "memory")
    sid = new_session(srv)
    entry = "The project indents with tabs."
    llm.script(
        Reply(
            tool_calls=[
                {"name": "memory", "arguments": {"action": "add", "target": "memory", "content": entry}}
            ]
        ),
        Reply(text="Noted."),
    )
    assert text_of(chat(srv, sid, "remember: tabs")).strip() == "Noted."
    calls = [m for m in on_disk(srv, sid)["messages"] if m.get("role") == "tool"]
    assert '"success": true' in str(calls[-1]["content"]).replace("True", "true")  # the turn shows the change

    status, refused = srv.json(
        "POST",
        "/api/memory/write",
        {"target": "memory", "content": "the person's text", "base_version": read_by_page["version"]},
    )
    assert (
        status == 409 and entry in refused["current"]["content"] and refused["yours"] == "the person's text"
    )
    assert entry in _file(srv, "memory")["content"]

    merged = refused["current"]["content"] + "\n§\nAlso: tests live in tests/."
    status, written = srv.json(
        "POST",
        "/api/memory/write",
        {"target": "memory", "content": merged, "base_version": refused["current"]["version"]},
    )
    assert status == 200 and _file(srv, "memory")["content"] == merged

    # The agent reads the person's edit: its next add keeps both entries.
    llm.script(
        Reply(
            tool_calls=[
                {
                    "name": "memory",
                    "arguments": {"action": "add", "target": "memory", "content": "Uses pytest."},
                }
            ]
        ),
        Reply(text="Added."),
    )
    chat(srv, sid, "remember: pytest")
    final = _file(srv, "memory")["content"]
    assert entry in final and "tests live in tests/" in final and "Uses pytest." in final
    assert written["file"]["version"] != _file(srv, "memory")["version"]


def test_bad_writes_get_a_clear_error(srv):
    for body in (
        {"target": "diary", "content": "x", "base_version": ""},
        {"target": "user", "content": ["x"]},
    ):
        status, answer = srv.json("POST", "/api/memory/write", body)
        assert status == 400 and answer["error"]

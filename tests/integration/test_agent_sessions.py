"""The agent's own sessions through the real server: one sidebar row per compression lineage, continued in
Talaria with the whole history reaching the model, the agent's rows in ``state.db`` untouched."""

from __future__ import annotations

import http.client
import json
from pathlib import Path

import pytest

from talaria_testing.agent_sessions import (
    CLI_ROOT,
    CLI_TIP,
    CRON,
    TELEGRAM,
    add_agent_session,
    snapshot,
    write_agent_sessions,
)
from talaria_testing.chat_client import chat, session, text_of
from talaria_testing.fake_llm import Reply, agent_server
from talaria_testing.fake_llm_server import message_text

pytestmark = pytest.mark.integration


@pytest.fixture
def srv(llm, tmp_path):
    server = agent_server(tmp_path, llm.base_url)
    write_agent_sessions(Path(server.hermes_home) / "state.db")
    with server:
        yield server


def _agent_rows(srv) -> list[dict]:
    return srv.get_json("/api/sessions")["agent_sessions"]


def test_a_compressed_cli_conversation_is_one_row_with_the_history_of_every_segment(srv):
    rows = {row["id"]: row for row in _agent_rows(srv)}
    assert CLI_ROOT not in rows and rows[CLI_TIP]["segments"] == 2
    assert rows[CLI_TIP]["title"] == "Refactor the parser" and rows[CLI_TIP]["message_count"] == 4
    assert {rows[TELEGRAM]["source"], rows[CRON]["source"]} == {"telegram", "cron"}
    shown = srv.get_json(f"/api/session?session_id={CLI_TIP}")["session"]
    assert [m["content"] for m in shown["messages"]] == [
        "start with the lexer", "lexer done, zebrafish", "now the parser", "parser done",
    ]  # fmt: skip
    assert shown["read_only"] is True and shown["agent_segments"] == [CLI_ROOT, CLI_TIP]
    assert shown["title"] == "Refactor the parser"


@pytest.mark.parametrize("agent_sid", [CLI_TIP, TELEGRAM, CRON])
def test_continuing_an_agent_session_sends_its_whole_history_and_leaves_state_db_as_it_was(
    srv, fake, agent_sid
):
    db_path = Path(srv.hermes_home) / "state.db"
    before = snapshot(db_path)
    history = [
        m["content"] for m in srv.get_json(f"/api/session?session_id={agent_sid}")["session"]["messages"]
    ]
    continued = srv.post_json("/api/session/import_cli", {"session_id": agent_sid})["session"]
    sid = continued["session_id"]
    assert sid != agent_sid and continued["agent_session_id"] == agent_sid and not continued["read_only"]
    assert snapshot(db_path) == before

    fake.script(Reply(text="carrying on"))
    assert text_of(chat(srv, sid, "and next?")) == "carrying on"
    sent = [message_text(m.get("content")) for m in fake.chat_requests()[-1]["body"]["messages"]]
    assert sent[-len(history) - 1 :] == [*history, "and next?"]
    assert [m["content"] for m in session(srv, sid)["messages"]][-2:] == ["and next?", "carrying on"]

    sessions_after, messages_after = snapshot(db_path)
    agent_rows = {row[0] for row in before[0]}
    assert [r for r in sessions_after if r[0] in agent_rows] == before[0]
    assert [m for m in messages_after if m[1] in agent_rows] == before[1]


def test_the_sidebar_shows_the_continuation_not_the_agent_conversation(srv):
    first = srv.post_json("/api/session/import_cli", {"session_id": CLI_TIP})["session"]
    again = srv.post_json("/api/session/import_cli", {"session_id": CLI_ROOT})["session"]
    assert again["session_id"] == first["session_id"]
    listing = srv.get_json("/api/sessions")
    assert CLI_TIP not in {row["id"] for row in listing["agent_sessions"]}
    mine = [row for row in listing["sessions"] if row.get("agent_session_id") == CLI_TIP]
    assert [row["session_id"] for row in mine] == [first["session_id"]]


@pytest.mark.parametrize(
    "body, status",
    [
        ({"session_id": "no_such_session"}, 404),
        ({"session_id": "../etc"}, 400),
        ({"session_id": 7}, 400),
        ({}, 400),
        ([1, 2], 400),
    ],
)
def test_continuing_an_unknown_or_hostile_id_is_a_clear_error_that_changes_nothing(srv, body, status):
    before = srv.get_json("/api/sessions")
    code, _, raw = srv.request("POST", "/api/session/import_cli", body)
    assert code == status and json.loads(raw)["error"]
    assert srv.get_json("/api/sessions")["sessions"] == before["sessions"]


def _next_agent_list(srv, after: int, timeout: float = 15.0) -> list[dict]:
    """The next ``agent_sessions`` event on ``/api/sessions/feed?after=``."""
    conn = http.client.HTTPConnection(srv.host, srv.port, timeout=timeout)
    try:
        conn.request("GET", f"/api/sessions/feed?after={after}", headers={"Accept": "text/event-stream"})
        resp = conn.getresponse()
        event = None
        while line := resp.readline():
            if line.startswith(b"event:"):
                event = line[6:].strip()
            elif line.startswith(b"data:") and event == b"agent_sessions":
                return json.loads(line[5:])["agent_sessions"]
        raise AssertionError("the feed ended without an agent_sessions event")
    finally:
        conn.close()


def test_a_session_the_agent_writes_reaches_the_sidebar_feed_and_the_list(srv):
    after = srv.get_json("/api/sessions")["feed_seq"]
    add_agent_session(
        Path(srv.hermes_home) / "state.db", "discord_new", "discord", "Raid night", "who is in?"
    )
    rows = _next_agent_list(srv, after)
    assert "discord_new" in {row["id"] for row in rows}
    assert "discord_new" in {row["id"] for row in _agent_rows(srv)}


def test_continuing_a_session_takes_its_row_out_of_every_followed_sidebar(srv):
    after = srv.get_json("/api/sessions")["feed_seq"]
    srv.post_json("/api/session/import_cli", {"session_id": TELEGRAM})
    assert TELEGRAM not in {row["id"] for row in _next_agent_list(srv, after)}


def test_content_search_finds_a_word_in_an_agent_conversation_through_its_index(srv):
    found = srv.get_json("/api/sessions/search?q=zebrafish&content=1")["sessions"]
    assert [(row["session_id"], row["read_only"]) for row in found] == [(CLI_TIP, True)]
    assert found[0]["match"]["message_idx"] == 1 and "zebrafish" in found[0]["match"]["snippet"]
    inside_a_word = srv.get_json("/api/sessions/search?q=EBRAFI&content=1")["sessions"]
    assert [row["session_id"] for row in inside_a_word] == [CLI_TIP]
    milk = srv.get_json("/api/sessions/search?q=buy%20milk&content=1")["sessions"]
    assert [(row["session_id"], row["source"]) for row in milk] == [(TELEGRAM, "telegram")]
    assert srv.get_json("/api/sessions/search?q=zebrafish")["sessions"] == []  # titles only
    hostile = srv.get_json("/api/sessions/search?q=%22%20OR%20*%20NEAR(&content=1")["sessions"]
    assert hostile == []

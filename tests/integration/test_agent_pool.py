"""The warm-up at start builds the most recent session's agent in the background; turns use the pool."""

from __future__ import annotations

import time

import pytest

from talaria_testing.chat_client import chat, named, new_session, text_of
from talaria_testing.fake_llm import FakeLLM, agent_server
from talaria_testing.server_proc import ServerProc

pytestmark = pytest.mark.integration


def _wait_for_line(srv: ServerProc, needle: str, timeout: float = 120.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for line in list(srv.output):
            if needle in line:
                return line
        time.sleep(0.1)
    raise AssertionError(f"no {needle!r} in the server log:\n{srv.log_text()[-3000:]}")


def test_a_restart_warms_the_latest_sessions_agent_and_turns_during_and_after_it_answer(tmp_path):
    with FakeLLM() as llm:
        srv = agent_server(tmp_path, llm.base_url)
        with srv:
            older = new_session(srv)
            llm.script("first answer")
            assert text_of(chat(srv, older, "hello")) == "first answer"
            latest = new_session(srv)
            llm.script("second answer")
            assert text_of(chat(srv, latest, "hello again")) == "second answer"
        srv.extra_env["TALARIA_WARM_UP"] = "1"
        with srv:
            llm.script("during the warm-up")  # sent at once: the turn waits for the agent being warmed
            events = chat(srv, latest, "are you there?")
            assert text_of(events) == "during the warm-up" and not named(events, "error")
            _wait_for_line(srv, f"warm-up: built the agent of session {latest}")
            _wait_for_line(srv, "warm-up done in")
            llm.script("after the warm-up")
            assert text_of(chat(srv, latest, "still there?")) == "after the warm-up"
            assert text_of(chat(srv, older, "and you?")) != ""  # a session not warmed builds its own


def test_a_first_start_warms_up_without_leaving_a_session_behind(tmp_path):
    from api.store import state_db

    with FakeLLM() as llm, agent_server(tmp_path, llm.base_url, env={"TALARIA_WARM_UP": "1"}) as srv:
        _wait_for_line(srv, "warm-up done in")
        assert "warm-up: built the agent of session" not in srv.log_text()
        assert not (srv.hermes_home / "state.db").exists() or "warm-up" not in (
            state_db.session_ids(srv.hermes_home / "state.db") or set()
        )
        assert srv.get_json("/api/sessions")["sessions"] == []
        llm.script("first answer")
        assert text_of(chat(srv, new_session(srv), "hello")) == "first answer"

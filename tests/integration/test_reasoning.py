"""A session's reasoning effort through the real server and agent: the picker's facts come from the agent's
own rule for the model's route, and the chosen effort reaches the model. The fake LLM answers as an LM
Studio server that declares reasoning levels (the agent probes its /api/v1/models), or as a plain
OpenAI-compatible endpoint, where the agent sends no effort."""

from __future__ import annotations

import pytest

from talaria_testing.chat_client import chat, new_session
from talaria_testing.fake_llm import FakeLLM, Reply, agent_server

pytestmark = pytest.mark.integration

LEVELS = ("off", "low", "medium", "high")


@pytest.fixture(scope="module")
def studio():
    with FakeLLM() as server:
        server.reasoning_options = LEVELS
        yield server


@pytest.fixture(scope="module")
def srv(studio, tmp_path_factory):
    model = {"model": {"provider": "lmstudio"}, "agent": {"reasoning_effort": "low"}}
    with agent_server(tmp_path_factory.mktemp("reasoning"), studio.base_url, extra=model) as server:
        yield server


@pytest.fixture(scope="module")
def plain(llm, tmp_path_factory):
    with agent_server(tmp_path_factory.mktemp("plain"), llm.base_url) as server:
        yield server


def _effort_sent(fake: FakeLLM) -> object:
    return fake.chat_requests()[-1]["body"].get("reasoning_effort")


def test_the_configured_effort_is_the_default_and_a_sessions_choice_reaches_the_model(srv, studio):
    """Talaria built its agents without the agent's reasoning config, so `agent.reasoning_effort` in
    config.yaml was never sent."""
    with studio.fresh():
        sid = new_session(srv)
        facts = srv.get_json(f"/api/reasoning?session_id={sid}")
        assert facts["supported"] is True and facts["effort"] is None and facts["default"] == "low"
        assert facts["levels"][0] == "none" and "high" in facts["levels"]
        studio.script(Reply(text="thought a little"), Reply(text="thought hard"))
        chat(srv, sid, "first")
        assert _effort_sent(studio) == "low"

        status, answer = srv.json("POST", "/api/reasoning", {"session_id": sid, "effort": "high"})
        assert status == 200 and answer["effort"] == "high"
        chat(srv, sid, "second")
        assert _effort_sent(studio) == "high"
        assert srv.get_json(f"/api/reasoning?session_id={sid}")["effort"] == "high"


def test_a_route_that_takes_no_effort_gets_no_picker(plain):
    sid = new_session(plain)
    assert plain.get_json(f"/api/reasoning?session_id={sid}")["supported"] is False


@pytest.mark.parametrize("effort", ["extreme", 3, ["high"]])
def test_an_unknown_effort_is_refused_and_changes_nothing(srv, effort):
    sid = new_session(srv)
    status, answer = srv.json("POST", "/api/reasoning", {"session_id": sid, "effort": effort})
    assert status == 400 and "effort must be one of" in answer["error"]
    assert srv.get_json(f"/api/reasoning?session_id={sid}")["effort"] is None

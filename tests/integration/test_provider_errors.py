"""A failed model call says what to do: the real server and agent against the fake LLM (or no server)."""

from __future__ import annotations

import time

import pytest

from talaria_testing.chat_client import chat, named, new_session, read_all, text_of
from talaria_testing.fake_llm import Reply, agent_server, refused_base_url

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def srv(llm, tmp_path_factory):
    with agent_server(tmp_path_factory.mktemp("provider_errors"), llm.base_url) as server:
        yield server


def _error(events) -> str:
    errors = named(events, "error")
    assert len(errors) == 1, events
    return errors[0]["message"]


def test_401_points_at_the_key_and_the_next_turn_answers(llm, srv):
    llm.reset()
    sid = new_session(srv)
    llm.script(Reply(status=401, error="Incorrect API key provided"))
    message = _error(chat(srv, sid, "hello"))
    assert message.startswith("HTTP 401: Incorrect API key provided. The model endpoint ")
    assert f"Set `model.api_key` in {srv.hermes_home / 'config.yaml'}, or the provider's key in " in message
    llm.script("working again")
    events = chat(srv, sid, "and now?")
    assert text_of(events) == "working again" and not named(events, "error")


def test_an_unknown_model_lists_the_models_the_endpoint_offers(llm, srv):
    llm.reset()
    sid = new_session(srv)
    llm.script(Reply(status=404, error="The model `gpt-9` does not exist or you do not have access to it."))
    started = srv.post_json("/api/chat/start", {"session_id": sid, "message": "hi", "model": "gpt-9"})
    message = _error(read_all(srv, started["stream_id"]))
    assert f"does not offer the model 'gpt-9'. It offers: {llm.model}. Set `model.default` in " in message
    saved = srv.get_json(f"/api/session?session_id={sid}")["session"]["messages"]
    assert saved[-1]["_error"] and "It offers: " in saved[-1]["content"]


def test_a_refused_connection_names_the_base_url_and_the_config_file(tmp_path):
    base_url = refused_base_url()
    with agent_server(tmp_path, base_url) as srv:
        message = _error(chat(srv, new_session(srv), "anyone there?"))
        assert f"cannot reach the model endpoint {base_url} (the connection was refused)" in message
        assert f"`model.base_url` in {srv.hermes_home / 'config.yaml'}" in message


def test_a_refused_endpoint_is_reported_at_start_by_the_warm_up(tmp_path):
    base_url = refused_base_url()
    srv = agent_server(tmp_path, base_url)
    srv.extra_env["TALARIA_WARM_UP"] = "1"
    with srv:
        needle = (
            f"WARNING talaria.agent_pool: Talaria cannot reach the model endpoint {base_url} (the connection"
        )
        deadline = time.monotonic() + 120
        while needle not in srv.log_text() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert needle in srv.log_text(), srv.log_text()[-3000:]

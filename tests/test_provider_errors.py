"""The agent's error text → a message naming the fix, checked against the fake LLM on 127.0.0.1."""

from __future__ import annotations

import pytest

from api.agent import provider_errors
from api.agent.endpoint_probe import ProbeResult
from api.agent.provider_errors import Endpoint
from api.store import config
from talaria_testing.fake_llm import refused_base_url


@pytest.mark.parametrize(
    "text,kind",
    [
        ("Connection error.", "connection"),
        ("HTTP 401: Incorrect API key provided", "auth"),
        ("Error code: 403 - forbidden", "auth"),
        ("HTTP 404: The model `gpt-9` does not exist or you do not have access to it.", "unknown_model"),
        ("model_not_found", "unknown_model"),
        ("HTTP 500: upstream exploded", None),
        ("", None),
    ],
)
def test_classify_sorts_the_agents_error_text(text, kind):
    assert provider_errors.classify(text) == kind


def test_connection_refused_names_the_base_url_and_the_config_file():
    endpoint = Endpoint(refused_base_url(), "m")
    message = provider_errors.explain("Connection error.", endpoint)
    assert message.startswith("Connection error. Talaria cannot reach the model endpoint ")
    assert f"{endpoint.base_url} (the connection was refused)" in message
    assert f"`model.base_url` in {config.HERMES_HOME / 'config.yaml'}" in message


def test_a_connection_error_with_the_endpoint_answering_again_is_left_as_it_was(llm):
    assert provider_errors.explain("Connection error.", Endpoint(llm.base_url, "m")) == "Connection error."


def test_401_points_at_the_key(llm):
    message = provider_errors.explain("HTTP 401: Incorrect API key provided", Endpoint(llm.base_url, "m"))
    assert message.startswith("HTTP 401: Incorrect API key provided. ")
    assert "refused the API key. Set `model.api_key` in " in message
    assert str(config.HERMES_HOME / ".env") in message


def test_an_unknown_model_lists_the_models_the_endpoint_offers(llm):
    message = provider_errors.explain(
        "HTTP 404: The model `gpt-9` does not exist", Endpoint(llm.base_url, "gpt-9", "sk-test-1234")
    )
    assert f"does not offer the model 'gpt-9'. It offers: {llm.model}. Set `model.default`" in message
    assert llm.requests("/v1/models")[-1]["headers"]["Authorization"] == "Bearer sk-test-1234"


def test_a_long_model_list_is_cut_short():
    probe = ProbeResult(True, "", [f"m{i:02d}" for i in range(25)])
    message = provider_errors.advice("unknown_model", Endpoint("http://x/v1", "gpt-9"), probe)
    assert "m19 and 5 more." in message and "m20" not in message


def test_other_errors_and_unknown_endpoints_keep_the_agents_text():
    assert provider_errors.explain("HTTP 500: boom", Endpoint("http://x/v1", "m")) == "HTTP 500: boom"
    assert provider_errors.explain("Connection error.", None) == "Connection error."


def test_probe_reports_refused_and_auth(llm):
    assert provider_errors.probe_endpoint(Endpoint(refused_base_url(), "m")).kind == "refused"
    ok = provider_errors.probe_endpoint(Endpoint(llm.base_url, "m"))
    assert (ok.kind, ok.models) == ("ok", [llm.model])
    missing = provider_errors.probe_endpoint(Endpoint(llm.url + "/nowhere", "m"))
    assert (missing.kind, missing.message) == ("no_list", "The endpoint answered HTTP 404 to GET /models.")

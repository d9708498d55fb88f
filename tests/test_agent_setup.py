"""First-run setup through the agent's own config functions, in a home of the test's own."""

from __future__ import annotations

import json

import pytest
import yaml

from api.agent import agent_setup, model_catalog
from api.rules.errors import BadRequest


@pytest.fixture
def home(tmp_path, monkeypatch):
    """An empty Hermes home for the agent's config functions (they read ``HERMES_HOME`` at call time)."""
    monkeypatch.setenv("HERMES_HOME", str(tmp_path))
    monkeypatch.setenv("DEEPSEEK_API_KEY", "")  # restored (absent) afterwards; the save sets it
    model_catalog.invalidate()
    yield tmp_path
    model_catalog.invalidate()


def test_an_empty_home_is_not_configured_and_lists_key_providers(home):
    status = agent_setup.setup_status()
    assert status["configured"] is False and status["default_model"] == ""
    ids = [row["id"] for row in status["providers"]]
    assert "deepseek" in ids and "nous" not in ids  # nous signs in by OAuth, not a key
    assert len(ids) == len(set(ids))


def test_a_known_provider_key_goes_to_env_and_is_never_answered(home):
    status = agent_setup.save_setup(
        {"kind": "provider", "provider": "deepseek", "api_key": "sk-deep-5678", "model": "deepseek-chat"}
    )
    assert "sk-deep-5678" not in json.dumps(status)
    assert status["default_model"] == "deepseek-chat"
    assert next(p for p in status["providers"] if p["id"] == "deepseek")["has_key"] is True
    assert "DEEPSEEK_API_KEY=sk-deep-5678" in (home / ".env").read_text(encoding="utf-8")
    model = yaml.safe_load((home / "config.yaml").read_text(encoding="utf-8"))["model"]
    assert model["provider"] == "deepseek" and model["default"] == "deepseek-chat"
    assert "api_key" not in model and "base_url" not in model


def test_switching_from_a_custom_endpoint_to_a_provider_drops_the_inline_key(home):
    agent_setup.save_setup(
        {"kind": "custom", "base_url": "http://127.0.0.1:9/v1", "api_key": "sk-inline-1", "model": "m"}
    )
    agent_setup.save_setup({"kind": "provider", "provider": "deepseek", "api_key": "sk-deep-2", "model": "d"})
    model = yaml.safe_load((home / "config.yaml").read_text(encoding="utf-8"))["model"]
    assert model == {"provider": "deepseek", "default": "d"}


@pytest.mark.parametrize(
    "body",
    [
        {"kind": "custom", "base_url": "gopher://x/v1", "model": "m"},
        {"kind": "custom", "base_url": "http://127.0.0.1/v1", "model": None},
        {"kind": "custom", "base_url": "http://127.0.0.1/v1", "model": "m", "api_key": ["k"]},
        {"kind": "provider", "provider": "nous", "model": "m", "api_key": "sk-1234"},
        {"kind": "provider", "provider": {"id": "deepseek"}, "model": "m", "api_key": "sk-1234"},
        {"kind": "provider", "provider": "deepseek", "model": "m"},
        {"model": "m"},
    ],
)
def test_bad_setup_input_writes_nothing(home, body):
    with pytest.raises(BadRequest):
        agent_setup.save_setup(body)
    assert not (home / "config.yaml").exists() and not (home / ".env").exists()


def test_a_connection_test_of_an_unknown_kind_is_refused(home):
    with pytest.raises(BadRequest):
        agent_setup.test_connection({"kind": "ftp", "base_url": "http://127.0.0.1/v1"})


def test_a_provider_that_speaks_another_protocol_is_not_probed(home):
    answer = agent_setup.test_connection(
        {"kind": "provider", "provider": "anthropic", "api_key": "sk-ant-1234"}
    )
    assert (
        answer["ok"] is None
        and "first message" in answer["message"]
        and "sk-ant-1234" not in answer["message"]
    )

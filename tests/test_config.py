"""Settings as data, the cache's safe eviction, locks, model/provider resolution."""

from __future__ import annotations

import time

import pytest

from api import config
from api.models import Session


def test_settings_table_has_help_for_every_setting():
    assert all(s.help and s.name for s in config.SETTINGS)


def test_environment_overrides_yaml_and_default(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.yaml").write_text("webui:\n  port: 9100\n  sessions_cache_max: 7\n")
    values = config.load_settings({"HERMES_HOME": str(home), "TALARIA_PORT": "9200"})
    assert values["port"] == 9200
    assert values["sessions_cache_max"] == 7
    assert values["state_dir"] == str((home / "webui").resolve())
    assert values["host"] == "127.0.0.1"


def test_state_dir_comes_from_hermes_webui_state_dir(tmp_path):
    values = config.load_settings(
        {"HERMES_HOME": str(tmp_path), "HERMES_WEBUI_STATE_DIR": str(tmp_path / "st")}
    )
    assert values["state_dir"] == str(tmp_path / "st")


def test_tests_never_point_at_the_real_hermes_home():
    from pathlib import Path

    assert Path("~/.hermes").expanduser().resolve() != config.HERMES_HOME


def _cached(sid, **kw):
    s = Session(session_id=sid, **kw)
    config.SESSIONS[sid] = s
    return s


def test_eviction_never_drops_live_turns_or_unsaved_messages(state_dir):
    live = _cached("live", active_stream_id="x")
    unsaved = _cached("unsaved", messages=[{"role": "user", "content": "hi"}])
    pending = _cached("pending", pending_user_message="hello")
    saved = _cached("saved", messages=[{"role": "user", "content": "hi"}])
    saved.save()
    with config.LOCK:
        config.evict_sessions_over_cap(cap=0)
    assert "saved" not in config.SESSIONS
    assert {"live", "unsaved", "pending"} <= set(config.SESSIONS)
    assert live and unsaved and pending


def test_fresh_empty_shell_is_protected_for_a_while(state_dir):
    _cached("fresh")
    old = _cached("old-shell", created_at=time.time() - 7200)
    with config.LOCK:
        config.evict_sessions_over_cap(cap=0)
    assert "fresh" in config.SESSIONS
    assert "old-shell" not in config.SESSIONS
    assert old


def test_session_agent_lock_is_shared_per_id():
    a = config._get_session_agent_lock("x")
    assert config._get_session_agent_lock("x") is a
    assert config._get_session_agent_lock("y") is not a


@pytest.mark.parametrize(
    "model,provider,expected",
    [
        ("gpt", "openai", "@openai:gpt"),
        ("gpt", "", "gpt"),
        ("gpt", "default", "gpt"),
        ("@x:gpt", "openai", "@x:gpt"),
    ],
)
def test_model_with_provider_context(model, provider, expected):
    assert config.model_with_provider_context(model, provider) == expected


def test_resolve_model_provider_reads_the_agent_config(monkeypatch, tmp_path):
    (tmp_path / "config.yaml").write_text(
        "model:\n  provider: custom\n  base_url: http://127.0.0.1:1/v1\n  default: fake\n"
    )
    monkeypatch.setattr(config, "HERMES_HOME", tmp_path)
    assert config.resolve_model_provider("") == ("fake", "custom", "http://127.0.0.1:1/v1")
    assert config.resolve_model_provider("@openrouter:m") == ("m", "openrouter", None)

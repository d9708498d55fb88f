"""``talaria doctor``'s checks, each on a healthy and a broken set-up (the model against the fake LLM)."""

from __future__ import annotations

import pytest

from api.server import doctor
from api.store import config
from talaria_testing.fake_llm import FakeLLM, refused_base_url, write_hermes_config


def _runtime(model: str, provider: str | None) -> dict:
    """What the agent's resolution answers for a custom endpoint: its URL and key from config.yaml."""
    cfg = config._agent_model_config()
    return {"provider": provider, "base_url": cfg.get("base_url"), "api_key": cfg.get("api_key")}


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setattr(config, "HERMES_HOME", tmp_path)
    return tmp_path


def test_config_file_missing_is_a_warning_and_bad_yaml_a_failure(home):
    assert doctor.check_config_file(home).status == doctor.WARN
    (home / "config.yaml").write_text("model:\n  default: [unclosed\n")
    check = doctor.check_config_file(home)
    assert check.status == doctor.FAIL and "is not valid YAML (line 3)" in check.detail and check.fix
    (home / "config.yaml").write_text("model:\n  default: m\n")
    assert doctor.check_config_file(home).status == doctor.OK


def test_state_dir_writable_missing_or_a_file(tmp_path):
    assert doctor.check_state_dir(tmp_path).status == doctor.OK
    assert doctor.check_state_dir(tmp_path / "new" / "webui").detail.endswith("(created at the first start)")
    (tmp_path / "file").write_text("x")
    check = doctor.check_state_dir(tmp_path / "file")
    assert (check.status, check.detail) == (doctor.FAIL, f"{tmp_path / 'file'} is not a folder")
    assert "HERMES_WEBUI_STATE_DIR" in check.fix
    assert list(tmp_path.iterdir()) == [tmp_path / "file"]  # the probe file is gone, nothing created


def test_state_db_absent_readable_or_corrupt(tmp_path):
    path = tmp_path / "state.db"
    assert "not created yet" in doctor.check_state_db(path).detail
    from hermes_state import SessionDB

    db = SessionDB(db_path=path)
    db.create_session("s1", source="cli")
    db.close()
    assert doctor.check_state_db(path).detail == f"{path} (1 agent sessions)"
    corrupt = tmp_path / "corrupt.db"
    corrupt.write_bytes(b"not a database" * 100)
    check = doctor.check_state_db(corrupt)
    assert check.status == doctor.FAIL and "cannot be read" in check.detail and "doctor" in check.fix


def test_model_missing_refused_unknown_and_healthy(home):
    assert doctor.check_model(home, _runtime).detail == "no model is configured"
    write_hermes_config(home, refused_base_url())
    refused = doctor.check_model(home, _runtime)
    assert refused.status == doctor.FAIL and "the connection was refused" in refused.fix
    with FakeLLM() as llm:
        write_hermes_config(home, llm.base_url, model="gpt-9")
        unknown = doctor.check_model(home, _runtime)
        assert unknown.status == doctor.FAIL and f"It offers: {llm.model}." in unknown.fix
        write_hermes_config(home, llm.base_url)
        healthy = doctor.check_model(home, _runtime)
        assert (healthy.status, healthy.detail) == (doctor.OK, f"{llm.model} at {llm.base_url}, reachable")


def test_render_shows_fixes_of_failures_only():
    text = doctor.render(
        [doctor.Check("a", doctor.OK, "fine", "unused"), doctor.Check("b", doctor.FAIL, "bad", "do x")]
    )
    assert text.splitlines() == [
        "ok    a          fine",
        "FAIL  b          bad",
        f"{'':<16} fix: do x",
        "1 check(s) failed.",
    ]


def test_state_dir_held_by_a_running_talaria_names_the_process(tmp_path):
    import os

    from api.store import state_lock

    state_lock.acquire(tmp_path)
    try:
        check = doctor.check_state_dir(tmp_path)
        assert check.status == doctor.FAIL and f"is in use by process {os.getpid()}" in check.detail
        assert "HERMES_WEBUI_STATE_DIR" in check.fix
    finally:
        state_lock.release(tmp_path)
    assert doctor.check_state_dir(tmp_path).status == doctor.OK

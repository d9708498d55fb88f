"""The settings a person changes in the page, through the real server: the command line's table and bounds,
written under webui: in the agent's config.yaml (so a restart keeps them), in force at once; a setting the
environment decides is refused with the variable's name."""

from __future__ import annotations

import pytest
import yaml

from talaria_testing.fake_llm import agent_server

pytestmark = pytest.mark.integration


def _values(srv) -> dict:
    return {row["name"]: row for row in srv.get_json("/api/settings")["settings"]}


def test_a_change_is_written_to_config_yaml_in_force_at_once_and_kept_over_a_restart(llm, tmp_path):
    server = agent_server(tmp_path, llm.base_url)
    with server:
        status, answer = server.json(
            "POST", "/api/settings", {"settings": {"approval_timeout": 45, "remote_images": True}}
        )
        assert status == 200
        rows = {row["name"]: row for row in answer["settings"]}
        assert rows["approval_timeout"]["value"] == 45 and rows["remote_images"]["value"] is True
        written = yaml.safe_load((server.hermes_home / "config.yaml").read_text())
        assert written["webui"]["approval_timeout"] == 45 and written["model"]["base_url"] == llm.base_url
        assert "api_key" in written["model"]  # the rest of the agent's config is kept
    with server:
        assert _values(server)["approval_timeout"]["value"] == 45


@pytest.mark.parametrize(
    "change, message",
    [
        ({"approval_timeout": -5}, "approval_timeout: must be"),
        ({"approval_timeout": "soon"}, "approval_timeout: must be"),
        ({"port": 80}, "'port' is not a setting the page changes"),
        ({"clarify_timeout": {"deep": 1}}, "clarify_timeout: must be"),
    ],
)
def test_a_value_the_command_line_would_refuse_is_refused_and_nothing_is_written(
    llm, tmp_path, change, message
):
    server = agent_server(tmp_path, llm.base_url)
    with server:
        before = (server.hermes_home / "config.yaml").read_bytes()
        status, answer = server.json("POST", "/api/settings", {"settings": {"remote_images": True, **change}})
        assert status == 400 and message in answer["error"]
        assert (server.hermes_home / "config.yaml").read_bytes() == before
        assert _values(server)["remote_images"]["value"] is False


def test_a_setting_the_environment_decides_is_shown_locked_and_refused(llm, tmp_path):
    server = agent_server(tmp_path, llm.base_url, toolsets="todo")  # TALARIA_AGENT_TOOLSETS=todo
    with server:
        row = _values(server)["agent_toolsets"]
        assert row["locked_by"] == "TALARIA_AGENT_TOOLSETS" and row["value"] == "todo"
        status, answer = server.json("POST", "/api/settings", {"settings": {"agent_toolsets": "terminal"}})
        assert status == 400 and "TALARIA_AGENT_TOOLSETS" in answer["error"]

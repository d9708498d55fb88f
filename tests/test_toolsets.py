"""Toolsets per session: the agent's list, the default, and validation of a session's choice."""

from __future__ import annotations

import pytest
import yaml

from api import config, toolsets
from api.errors import BadRequest


@pytest.fixture
def setting(monkeypatch):
    def set_to(value: str) -> None:
        monkeypatch.setitem(config.SETTINGS_VALUES, "agent_toolsets", value)

    return set_to


def test_the_setting_decides_the_default_when_set(setting):
    setting("todo, memory")
    assert toolsets.default_toolsets() == ["todo", "memory"]
    setting("none")
    assert toolsets.default_toolsets() == []


def test_without_the_setting_the_agents_own_cli_toolsets_are_the_default(setting):
    setting("")
    default = toolsets.default_toolsets()
    assert "terminal" in default and "todo" in default


def test_a_session_choice_wins_over_the_default(setting):
    setting("todo")

    class Session:
        enabled_toolsets = ["memory"]

    assert toolsets.session_toolsets(Session()) == ["memory"]
    Session.enabled_toolsets = None
    assert toolsets.session_toolsets(Session()) == ["todo"]


def test_every_listed_toolset_has_a_label_and_description():
    rows = toolsets.available_toolsets()
    assert {"terminal", "todo", "file"} <= {row["name"] for row in rows}
    assert all(row["label"] and row["description"] for row in rows)
    assert all(not row["label"][0].isspace() for row in rows)


def test_clean_choice_keeps_known_names_once_and_refuses_the_rest():
    known = {"todo", "memory"}
    assert toolsets.clean_choice(["todo", "todo", "memory"], known) == ["todo", "memory"]
    assert toolsets.clean_choice(None, known) is None and toolsets.clean_choice([], known) == []
    for bad in (["nope"], "todo", [1], [""], {"todo": 1}, ["x" * 101]):
        with pytest.raises(BadRequest):
            toolsets.clean_choice(bad, known)


def test_the_persons_mcp_servers_are_in_the_default_and_in_the_menu(setting):
    """The agent's CLI offers every enabled MCP server by default; the web sessions asked for the
    platform toolsets without them, so a configured server never reached a turn."""
    setting("")
    path = config.HERMES_HOME / "config.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    servers = {"demo": {"command": "true"}, "off": {"command": "true", "enabled": False}}
    path.write_text(yaml.safe_dump({"mcp_servers": servers}), encoding="utf-8")
    try:
        default = toolsets.default_toolsets()
        menu = {row["name"]: row for row in toolsets.available_toolsets()}
    finally:
        path.unlink()
    assert "demo" in default and "off" not in default
    assert menu["demo"]["label"] == "MCP: demo" and "off" not in menu

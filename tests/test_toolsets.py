"""Toolsets per session: the agent's list, the default, and validation of a session's choice."""

from __future__ import annotations

import pytest
import yaml

from api.agent import toolsets
from api.rules.errors import BadRequest
from api.store import config
from api.store.models import Session


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
    setting("todo, memory")

    class Chosen:
        enabled_toolsets = ["memory"]

    assert toolsets.session_toolsets(Chosen()) == ["memory"]
    Chosen.enabled_toolsets = None
    assert toolsets.session_toolsets(Chosen()) == ["todo", "memory"]


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


def test_the_setting_is_a_ceiling_no_session_choice_can_pass(setting, state_dir):
    """``TALARIA_AGENT_TOOLSETS=none`` said "no tools", yet a session could switch the terminal on."""
    Session(session_id="ts1", messages=[]).save()
    setting("none")
    with pytest.raises(BadRequest, match="TALARIA_AGENT_TOOLSETS=none"):
        toolsets.set_session_toolsets("ts1", ["terminal"])
    assert Session.load("ts1").enabled_toolsets is None
    rows = {row["name"]: row for row in toolsets.list_for_session("ts1")["toolsets"]}
    assert not rows["terminal"]["available"] and not rows["terminal"]["enabled"]
    assert "TALARIA_AGENT_TOOLSETS=none" in rows["terminal"]["unavailable_reason"]


def test_a_choice_saved_before_the_setting_changed_is_cut_to_it(setting):
    class Chosen:
        enabled_toolsets = ["terminal", "todo", "file"]

    setting("none")
    assert toolsets.session_toolsets(Chosen()) == []
    setting("todo")
    assert toolsets.session_toolsets(Chosen()) == ["todo"]
    setting("")
    assert toolsets.session_toolsets(Chosen()) == ["terminal", "todo", "file"]


def test_a_toolset_whose_tools_all_lie_inside_the_ceiling_is_allowed(setting):
    assert toolsets.allowed("terminal", ["hermes-cli"]) and toolsets.allowed("todo", None)
    assert not toolsets.allowed("terminal", ["todo", "file"]) and not toolsets.allowed("terminal", [])
    assert toolsets.allowed("todo", ["todo"])

"""Toolsets per session: the agent's list, the default, and validation of a session's choice."""

from __future__ import annotations

import pytest

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

"""The agent's skills through the page, on the test's own HERMES_HOME with the agent's own skills code."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from api.agent import agent_commands, agent_skills
from api.rules.errors import BadRequest, Conflict, NotFound
from api.store import config

SKILL = "---\nname: greet\ndescription: Greet someone warmly\n---\n# Greet\nSay hello by name.\n"


@pytest.fixture(autouse=True)
def home() -> Iterator[Path]:
    """The test home's agent folder with one skill of the person's own, removed afterwards (the agent fixes
    its skills folder when first imported, so every test of a process uses the one home)."""
    root = Path(config.HERMES_HOME)
    folder = root / "skills" / "social" / "greet"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(SKILL, encoding="utf-8")
    agent_commands.reload_skills()  # the agent keeps its skill commands from its last scan
    try:
        yield root
    finally:
        shutil.rmtree(root / "skills" / "social")
        (root / "config.yaml").unlink(missing_ok=True)
        agent_commands.reload_skills()


def _row(name: str = "greet") -> dict:
    return next(row for row in agent_skills.list_skills()["skills"] if row["name"] == name)


def test_an_installed_skill_is_listed_with_its_source_and_command():
    assert _row() == {
        "name": "greet",
        "description": "Greet someone warmly",
        "category": "social",
        "source": "local",
        "enabled": True,
        "editable": True,
        "command": "/greet",
    }


def test_turning_a_skill_off_writes_the_agents_config_and_hides_its_command(home):
    agent_skills.set_enabled("greet", False)
    assert yaml.safe_load((home / "config.yaml").read_text())["skills"]["disabled"] == ["greet"]
    assert not _row()["enabled"]
    assert "greet" not in {row["name"] for row in agent_commands.list_commands()["commands"]}
    with pytest.raises(BadRequest, match="turned off"):
        agent_skills.invocation("/greet", "Bob")
    agent_skills.set_enabled("greet", True)
    assert _row()["enabled"] and agent_skills.read_skill("greet")["content"] == SKILL


def test_a_skills_command_sends_the_skill_with_the_instruction():
    message = agent_skills.invocation("/greet", "say hi to Bob")["message"]
    assert '"greet" skill' in message and "Say hello by name." in message and "say hi to Bob" in message
    with pytest.raises(NotFound):
        agent_skills.invocation("/nothing", "")


def test_an_edit_of_the_persons_skill_is_saved_and_a_stale_one_refused(home):
    read = agent_skills.read_skill("greet")
    edited = SKILL.replace("Say hello by name.", "Say hello by name, twice.")
    saved = agent_skills.save_skill("greet", edited, read["version"])
    assert (home / "skills/social/greet/SKILL.md").read_text() == edited and saved["version"] != read[
        "version"
    ]
    with pytest.raises(Conflict) as refused:
        agent_skills.save_skill("greet", SKILL, read["version"])
    assert refused.value.extra["current"]["content"] == edited


def test_a_skill_keeps_its_name_and_only_the_persons_own_are_edited(home, monkeypatch):
    read = agent_skills.read_skill("greet")
    with pytest.raises(BadRequest, match="front matter"):
        agent_skills.save_skill("greet", SKILL.replace("name: greet", "name: other"), read["version"])
    monkeypatch.setattr(agent_skills, "_sources", lambda: ({}, {"greet"}))
    assert _row()["source"] == "builtin" and not _row()["editable"]
    with pytest.raises(BadRequest, match="only your own"):
        agent_skills.save_skill("greet", SKILL, read["version"])


@pytest.mark.parametrize("name", [None, "", 5, "x" * 65, "../greet"])
def test_a_bad_or_unknown_name_is_refused(name):
    with pytest.raises((BadRequest, NotFound)):
        agent_skills.read_skill(name)


def test_the_composer_is_offered_the_agents_web_commands_and_the_skills():
    rows = {row["name"]: row for row in agent_commands.list_commands()["commands"]}
    assert {"new", "model", "help", "usage", "reload-mcp", "reload-skills", "greet"} <= set(rows)
    assert rows["model"]["args"] == "[model]" and rows["greet"]["kind"] == "skill"
    assert not {"quit", "snapshot", "platforms"} & set(rows)  # the CLI's own are left out

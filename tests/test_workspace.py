"""``api.services.workspace``: the default workspace, and the rules a chosen folder must meet (each refusal named)."""

from __future__ import annotations

import os

import pytest

from api.rules.errors import BadRequest, Conflict
from api.services import workspace
from api.store import config
from api.store.models import Session


@pytest.fixture
def rooted(tmp_path, monkeypatch):
    root = tmp_path / "root"
    root.mkdir()
    monkeypatch.setitem(config.SETTINGS_VALUES, "workspace_roots", str(root))
    return root


def test_a_folder_under_the_roots_is_taken_resolved(rooted):
    (rooted / "a" / "b").mkdir(parents=True)
    (rooted / "link").symlink_to(rooted / "a")
    assert workspace.choose(str(rooted / "a" / ".." / "a" / "b")) == str(rooted / "a" / "b")
    assert workspace.choose(str(rooted / "link")) == str(rooted / "a")
    assert workspace.choose(str(rooted)) == str(rooted)


@pytest.mark.parametrize(
    ("make", "reason"),
    [
        (lambda root: "relative/path", "absolute"),
        (lambda root: str(root / "missing"), "does not exist"),
        (lambda root: str(root / "file.txt"), "not a folder"),
        (lambda root: str(root.parent), "outside the allowed workspace roots"),
        (lambda root: str(root / "escape"), "outside the allowed workspace roots"),
        (lambda root: str(root / "loop"), "cannot be read"),
        (lambda root: "", "non-empty"),
        (lambda root: 42, "non-empty"),
        (lambda root: "/tmp\x00x", "not a valid path"),
        (lambda root: "/" + "a" * 5000, "not a valid path"),
    ],
)
def test_a_refused_folder_names_the_reason(rooted, make, reason):
    (rooted / "file.txt").write_text("x")
    (rooted / "escape").symlink_to(rooted.parent)
    (rooted / "loop").symlink_to(rooted / "loop")
    with pytest.raises(BadRequest, match=reason):
        workspace.choose(make(rooted))


def test_the_default_is_the_setting_then_the_agents_terminal_cwd_then_home(tmp_path, monkeypatch):
    home, agent_cwd, configured = (tmp_path / n for n in ("home", "agent", "configured"))
    for folder in (home, agent_cwd, configured):
        folder.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setitem(config.SETTINGS_VALUES, "workspace_roots", str(tmp_path))
    monkeypatch.setattr(config, "HERMES_HOME", tmp_path)
    monkeypatch.setitem(config.SETTINGS_VALUES, "default_workspace", "")
    (tmp_path / "config.yaml").write_text("terminal:\n  cwd: .\n")
    assert workspace.default() == str(home)  # "." is the agent's "launch folder", never ours
    (tmp_path / "config.yaml").write_text(f"terminal:\n  cwd: {agent_cwd}\n")
    assert workspace.default() == str(agent_cwd)
    monkeypatch.setitem(config.SETTINGS_VALUES, "default_workspace", str(configured))
    assert workspace.default() == str(configured)


def test_a_default_outside_the_roots_gives_way_to_home_then_the_first_root(tmp_path, monkeypatch):
    home, outside, root = (tmp_path / n for n in ("home", "outside", "root"))
    for folder in (home, outside, root):
        folder.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setitem(config.SETTINGS_VALUES, "default_workspace", str(outside))
    monkeypatch.setitem(config.SETTINGS_VALUES, "workspace_roots", f"{root}{os.pathsep}{home}")
    assert workspace.default() == str(home)
    monkeypatch.setitem(config.SETTINGS_VALUES, "workspace_roots", str(root))
    assert workspace.default() == str(root)


def test_a_turn_refuses_a_workspace_that_has_gone_away(rooted):
    gone = rooted / "gone"
    with pytest.raises(Conflict, match="no longer exists"):
        workspace.for_turn(Session(session_id="s1", workspace=str(gone)))
    gone.mkdir()
    assert workspace.for_turn(Session(session_id="s1", workspace=str(gone))) == str(gone)


def test_the_picker_lists_recent_existing_workspaces_once(state_dir, rooted):
    kept, removed = rooted / "kept", rooted / "removed"
    kept.mkdir()
    removed.mkdir()
    for sid, folder in (("a1", kept), ("a2", removed), ("a3", kept)):
        Session(session_id=sid, workspace=str(folder), messages=[{"role": "user", "content": "x"}]).save()
    removed.rmdir()
    overview = workspace.overview()
    assert overview["recent"] == [str(kept)] and overview["roots"] == [str(rooted)]

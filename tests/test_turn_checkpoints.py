"""The agent's checkpoint hook bound to a session's workspace (``api.agent.turn_checkpoints``): relative paths
and a command's default folder are the workspace's, not the worker process's; the agent's manager does the
rest and is put back after the turn."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from api.agent import turn_checkpoints
from api.agent.turn_checkpoints import WorkspaceCheckpoints


class Recorder:
    enabled = True
    max_snapshots = 7

    def __init__(self) -> None:
        self.taken: list[tuple[str, str]] = []

    def get_working_dir_for_path(self, file_path: str) -> str:
        return str(Path(file_path).parent)

    def ensure_checkpoint(self, working_dir: str, reason: str = "auto") -> bool:
        self.taken.append((working_dir, reason))
        return True


def test_relative_paths_are_the_workspaces_and_absolute_ones_are_left_alone(tmp_path):
    hook = WorkspaceCheckpoints(Recorder(), str(tmp_path))
    assert hook.get_working_dir_for_path("src/app.py") == str(tmp_path / "src")
    assert hook.get_working_dir_for_path("/elsewhere/x.py") == "/elsewhere"
    assert hook.enabled is True and hook.max_snapshots == 7  # the rest is the agent's manager's


def test_a_commands_folder_outside_the_workspace_is_the_workspace_and_one_inside_is_kept(tmp_path):
    recorder = Recorder()
    hook = WorkspaceCheckpoints(recorder, str(tmp_path))
    (tmp_path / "sub").mkdir()
    hook.ensure_checkpoint("/", "before terminal: rm -rf build")  # the agent's fallback: the process's folder
    hook.ensure_checkpoint("sub", "before terminal: rm x")
    hook.ensure_checkpoint("/other/project", "before write_file")  # a file's folder is the file's
    assert recorder.taken == [
        (str(tmp_path), "before terminal: rm -rf build"),
        (str(tmp_path / "sub"), "before terminal: rm x"),
        ("/other/project", "before write_file"),
    ]


def test_the_agents_own_manager_is_back_after_the_turn(tmp_path, monkeypatch):
    monkeypatch.setattr(turn_checkpoints.agent_runtime, "tools_elsewhere", lambda: False)
    own = Recorder()
    agent = SimpleNamespace(_checkpoint_mgr=own)
    with turn_checkpoints.bound(agent, str(tmp_path)):
        assert (
            isinstance(agent._checkpoint_mgr, WorkspaceCheckpoints) and agent._checkpoint_mgr.manager is own
        )
    assert agent._checkpoint_mgr is own

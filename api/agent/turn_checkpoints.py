"""The agent's checkpoint hook for one turn, bound to the session's workspace (``agent._checkpoint_mgr`` while
the turn runs, put back after it).

The agent resolves the path of a file it is about to change, and the folder of a command that has none, against
the process's own working folder; a worker serves many sessions, each in its own workspace, so a relative path
would checkpoint a folder of the worker's instead of the session's, and the changes view would find nothing.
On this machine the agent's own manager does the work, with relative paths taken from the workspace; where the
tools run in another execution environment, the host's store does (``api.agent.host_checkpoints``)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from api.agent import agent_runtime, host_checkpoints


class WorkspaceCheckpoints:
    """The agent's own checkpoint manager, with a session's workspace as the base of relative paths."""

    def __init__(self, manager: Any, workspace: str) -> None:
        self.manager = manager
        self.workspace = Path(workspace)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.manager, name)

    def _in_workspace(self, path: str) -> str:
        found = Path(path).expanduser()
        return str(found if found.is_absolute() else self.workspace / found)

    def get_working_dir_for_path(self, file_path: str) -> str:
        return str(self.manager.get_working_dir_for_path(self._in_workspace(file_path)))

    def ensure_checkpoint(self, working_dir: str, reason: str = "auto") -> bool:
        folder = self._in_workspace(working_dir)
        if reason.startswith("before terminal") and not Path(folder).resolve().is_relative_to(
            self.workspace.resolve()
        ):
            # A command's folder outside the workspace is the agent's fallback (the process's folder, or its
            # configured one) for a command that names none, which runs in the workspace.
            folder = str(self.workspace)
        return bool(self.manager.ensure_checkpoint(folder, reason))


@contextlib.contextmanager
def bound(agent: Any, workspace: str) -> Iterator[None]:
    """The turn's checkpoints taken of the session's ``workspace``: on its host where the tools run
    elsewhere, by the agent's own manager here."""
    own = getattr(agent, "_checkpoint_mgr", None)
    if own is None:
        yield
        return
    if agent_runtime.tools_elsewhere():
        agent._checkpoint_mgr = host_checkpoints.HostCheckpoints(workspace, agent_runtime.checkpoint_limits())
    else:
        agent._checkpoint_mgr = WorkspaceCheckpoints(own, workspace)
    try:
        yield
    finally:
        agent._checkpoint_mgr = own

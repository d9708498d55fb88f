"""The agent's checkpoint hook in an execution environment's worker: before the first file change of each
round of tool calls (the agent's own hook points: ``write_file``, ``patch``, a destructive command), a
snapshot of the session's workspace taken on the host, in the store kept there (``api.rules.checkpoint_scripts``),
dated by this machine's clock so the changes view finds each turn's.

The agent's ``CheckpointManager`` would snapshot a folder of this machine; this stands in its place
(``agent._checkpoint_mgr``) for the turn, with the same face: ``enabled``, ``new_turn``,
``get_working_dir_for_path`` and ``ensure_checkpoint``, which never raises and never blocks the tool."""

from __future__ import annotations

import logging
import time
from typing import Any

from api.agent import environment_exec
from api.rules import checkpoint_scripts, remote_output

log = logging.getLogger("talaria.host_checkpoints")

COMMAND_S = 60  # a snapshot of a large folder on a slow disk


class HostCheckpoints:
    """Snapshots of one session's workspace on its host, at most one per round of tool calls."""

    def __init__(self, workspace: str, limits: checkpoint_scripts.Limits) -> None:
        self.enabled = True
        self.max_snapshots = limits.snapshots  # read by the agent's ``/rollback`` listing
        self.workspace = workspace  # the folder as the session names it there
        self._folder = remote_output.remote_path(workspace)
        self._limits = limits
        self._taken = False

    def new_turn(self) -> None:
        """The agent calls this at the start of each round of tool calls."""
        self._taken = False

    def get_working_dir_for_path(self, file_path: str) -> str:
        """The folder to snapshot before ``file_path`` changes: always the session's workspace there (the
        changes view shows the workspace; a file outside it is not the page's to show or restore)."""
        return self.workspace

    def ensure_checkpoint(self, working_dir: str, reason: str = "auto") -> bool:
        """A snapshot of the workspace there, once per round; whether one was taken. A failure is logged and
        the tool runs anyway, as the agent's own checkpoints do."""
        if self._taken:
            return False
        self._taken = True
        script = checkpoint_scripts.snapshot(reason, int(time.time()), self._limits)
        try:
            answer: Any = environment_exec.run(remote_output.in_folder(self._folder, script), COMMAND_S)
        except Exception:  # noqa: BLE001 - a snapshot never stops the tool it precedes
            log.warning("a checkpoint of %s on the host failed", self.workspace, exc_info=True)
            return False
        framed = remote_output.unframed(str(answer.get("output") or ""))
        if framed is None or framed[1] != 0:
            code = None if framed is None else framed[1]
            log.info("no checkpoint of %s on the host (exit %s)", self.workspace, code)
            return False
        return True

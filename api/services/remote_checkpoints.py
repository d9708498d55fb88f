"""The checkpoints of a remote session's workspace, kept on its host (``api.rules.checkpoint_scripts``) and
read there through the environment (``api.services.environment_shell``): the folder's checkpoints, the files
changed across many ranges in one command, one file's diff, a snapshot, and a restore of chosen files.

The environment's worker takes a snapshot before each round of tool calls that changes files
(``api.agent.host_checkpoints``), so a remote session's turns are found and restored the way a local
session's are (``api.services.turn_changes``). The workspace is the one checkpointed folder: the page never
shows a file outside it."""

from __future__ import annotations

import base64
import itertools
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from api.agent.checkpoint_store import Project, Range
from api.rules import checkpoint_records, checkpoint_scripts, remote_output
from api.rules.checkpoint_records import FileChange, Point
from api.rules.checkpoint_scripts import NO_COMMIT, NO_GIT, NO_STORE, Limits
from api.rules.errors import ApiError, Conflict, NotFound
from api.services import environment_shell, environments
from api.services.environment_shell import Where


class HostKeeper:
    """The checkpoint store on the host of ``place``, sized by ``limits``."""

    def __init__(self, place: Where, limits: Limits) -> None:
        self.place = place
        self.limits = limits

    def _run(
        self, script: str, ok_codes: tuple[int, ...] = (0,), stdin: str | None = None
    ) -> tuple[bytes, int]:
        data, code = environment_shell.run_coded(self.place, script, (*ok_codes, NO_GIT), stdin)
        if code == NO_GIT:
            target = environments.target_of(self.place.entry)
            raise Conflict(f"git is not installed on {target}: each turn's checkpoints there need it")
        return data, code

    def histories(self) -> dict[Project, list[Point]]:
        """The workspace there, the one checkpointed folder, with its checkpoints oldest first (none before its
        first snapshot)."""
        records = remote_output.records(self._run(checkpoint_scripts.history())[0])
        if len(records) < 2:
            raise ApiError("The checkpoint store there gave a short answer", status=502)
        project = Project(Path(records[0]), "", records[1])
        return {project: checkpoint_records.points(records[2:])}

    def changes(self, ranges: Sequence[Range]) -> list[list[FileChange]]:
        """The files changed in each range, all from one command."""
        if not ranges:
            return []
        bounds = [(part.start, part.end) for part in ranges]
        data, code = self._run(checkpoint_scripts.changes(bounds, self.limits.file_mb), (0, NO_STORE))
        lines = data.decode("ascii", "replace").split("\n") if code == 0 else []
        if len(lines) < len(ranges):
            raise ApiError("The checkpoint store there gave a short answer", status=502)
        decoded = (base64.b64decode(line).decode("utf-8", "surrogateescape") for line in lines[: len(ranges)])
        return [checkpoint_records.changes(text) for text in decoded]

    def file_diff(self, part: Range, path: str | None) -> str:
        """The range's unified diff of one file, or of every file when ``path`` is None."""
        script = checkpoint_scripts.diff(part.start, part.end, path, self.limits.file_mb)
        return self._run(script)[0].decode("utf-8", "replace")

    def pinned(self, project: Project, commit: str) -> str:
        """The checkpoint itself: the host's store keeps a cut history's old commits for an hour."""
        return commit

    def has_commit(self, project: Project, commit: str) -> bool:
        return self._run(checkpoint_scripts.has_commit(commit), (0, NO_STORE, NO_COMMIT))[1] == 0

    def put_back(self, project: Project, source: str, paths: list[str], reason: str) -> tuple[str, int]:
        """The snapshot of the workspace there and the restore of ``paths`` from ``source``, in one command."""
        listed = b"".join(path.encode("utf-8", "surrogateescape") + b"\0" for path in paths)
        stdin = base64.b64encode(listed).decode("ascii")
        script = checkpoint_scripts.snapshot_then_restore(reason, int(time.time()), self.limits, source)
        data, code = self._run(script, (0, NO_COMMIT), stdin)
        kept, _, count = data.decode("ascii", "replace").partition("\0")
        if not checkpoint_records.is_commit_hash(kept):
            raise ApiError("The host could not take a checkpoint of the state before the restore", status=500)
        if code == NO_COMMIT:
            raise NotFound("No such checkpoint")
        return kept, int(count.strip()) if count.strip().isdigit() else len(paths)

    def check_path(self, path: Any) -> None:
        remote_output.checked_relative(path)


# ---------------------------------------------------------------- the checkpoint list (hermes-webui's)


def _project(keeper: HostKeeper) -> tuple[Project, list[Point]]:
    ((project, history),) = keeper.histories().items()
    return project, history


def list_checkpoints(keeper: HostKeeper) -> dict[str, Any]:
    """``{workspace, checkpoints}`` as the agent's list answers for a local folder: newest first, each with the
    counts of the change from the checkpoint before it, all counted in one command."""
    project, history = _project(keeper)
    steps = [Range(project, older.hash, newer.hash) for older, newer in itertools.pairwise(history)]
    counted = [[], *keeper.changes(steps)][: len(history)]  # the first has no checkpoint before it
    rows = [
        {
            "hash": point.hash,
            "short_hash": point.hash[:7],
            "timestamp": datetime.fromtimestamp(point.at, UTC).isoformat(),
            "reason": point.reason,
            "files_changed": len(files),
            "insertions": sum(change.insertions for change in files),
            "deletions": sum(change.deletions for change in files),
        }
        for point, files in zip(history, counted, strict=True)
    ]
    return {"workspace": str(project.folder), "checkpoints": rows[::-1]}


def _held(keeper: HostKeeper, commit: str) -> Project:
    project, _history = _project(keeper)
    if not keeper.has_commit(project, commit):
        raise NotFound(f"Checkpoint '{commit}' not found")
    return project


def diff_to_now(keeper: HostKeeper, commit: str) -> tuple[str, str]:
    """``(stat, diff)`` from the checkpoint to the workspace now there."""
    project = _held(keeper, commit)
    (files,) = keeper.changes([Range(project, commit, None)])
    text = keeper.file_diff(Range(project, commit, None), None)
    lines = [
        f" {change.path} | {'Bin' if change.binary else f'+{change.insertions} -{change.deletions}'}"
        for change in files
    ]
    if files:
        lines.append(
            f" {len(files)} file{'s' if len(files) != 1 else ''} changed, "
            f"{sum(c.insertions for c in files)} insertions(+), {sum(c.deletions for c in files)} deletions(-)"
        )
    return "\n".join(lines), text


def restore(keeper: HostKeeper, commit: str, relative: str | None) -> str:
    """Puts the workspace there (or one file of it) back as the checkpoint holds it, after a snapshot of the
    state now: that snapshot's hash, the one to restore to undo this."""
    project = _held(keeper, commit)
    if relative is not None:
        paths = [relative]
    else:
        (files,) = keeper.changes([Range(project, commit, None)])
        paths = [change.path for change in files]
    kept, _count = keeper.put_back(
        project, commit, paths, f"pre-rollback snapshot (restoring to {commit[:8]})"
    )
    return kept

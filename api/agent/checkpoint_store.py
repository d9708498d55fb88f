"""The agent's shadow checkpoint store (``tools.checkpoint_manager``), read and restored through the agent's
own helpers: the projects it keeps inside a folder (the agent checkpoints the folder of the file it writes,
or the nearest folder with a project marker, so one workspace can hold several), a project's checkpoints
oldest first, the files changed between two checkpoints or from one to the folder as it is now (one git
call for the whole list, whatever its length), one file's diff, and a restore of chosen files to a
checkpoint, after the agent's own snapshot of the state before it (the undo)."""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from api.agent import agent_runtime
from api.rules import checkpoint_records
from api.rules.checkpoint_records import FileChange, Point
from api.rules.errors import ApiError

FILES_MAX = 5_000  # a turn's list is cut here (the counts stay whole)
_PATHS_PER_CALL = 200  # paths handed to one git checkout


@dataclass(frozen=True)
class Project:
    folder: Path  # the folder the agent checkpointed (resolved)
    prefix: str  # that folder relative to the workspace, "" for the workspace itself
    key: str  # the store's name for it (its ref and index)


@dataclass(frozen=True)
class Range:
    """What changed in a project from checkpoint ``start`` to ``end`` (None: the folder now)."""

    project: Project
    start: str
    end: str | None


def _cm() -> Any:
    return agent_runtime.agent_module("tools.checkpoint_manager")


def _store() -> Path:
    cm = _cm()
    return Path(cm._store_path(cm.CHECKPOINT_BASE))


def _git(project: Project, args: list[str], index: Path | None = None) -> str:
    ok, out, _err = _cm()._run_git(
        args, _store(), str(project.folder), index_file=index, allowed_returncodes={1, 128}
    )
    if not ok:  # git's own message names the store's folders: the log has it, the page does not
        raise ApiError("The checkpoint store could not answer (git failed)", status=500)
    return str(out)


def projects_in(workspace: Path) -> list[Project]:
    """The checkpointed folders at or under ``workspace`` that still exist, the workspace's own first."""
    store = _store()
    if not (store / "HEAD").exists():
        return []
    found = []
    for meta in _cm()._list_projects(store):
        folder = Path(str(meta.get("workdir") or ""))
        if not folder.is_absolute() or not folder.is_dir() or not folder.is_relative_to(workspace):
            continue
        prefix = folder.relative_to(workspace).as_posix()
        found.append(Project(folder, "" if prefix == "." else prefix, str(meta.get("_hash") or "")))
    return sorted(found, key=lambda p: p.prefix)


def kept_per_folder() -> int:
    """How many checkpoints the agent keeps of a folder (its ``checkpoints.max_snapshots``)."""
    return int(agent_runtime.checkpoint_manager().max_snapshots)


def points(project: Project) -> list[Point]:
    """The project's checkpoints, oldest first (the agent keeps its newest ``max_snapshots``)."""
    ref = _cm()._ref_name(project.key)
    ok, out, _err = _cm()._run_git(
        ["log", ref, "--format=%H|%ct|%s", "--reverse"],
        _store(),
        str(project.folder),
        allowed_returncodes={128, 129},
    )
    return checkpoint_records.points(str(out).splitlines()) if ok else []


def _with_now(project: Project, run: Any) -> Any:
    """Runs ``run(index)`` with a scratch index holding the folder as it is now. It starts from a copy of
    the agent's own index (its file stats spare rehashing what did not change; git replaces that file by a
    rename, so a copy is never torn) and leaves that index and the store's refs untouched."""
    own = Path(_cm()._index_path(_store(), project.key))
    with tempfile.TemporaryDirectory(prefix="talaria-index-") as scratch:
        index = Path(scratch) / "index"
        if own.is_file():
            shutil.copyfile(own, index)
        _git(project, ["add", "-A"], index)
        return run(index)


def changes(project: Project, start: str, end: str | None) -> list[FileChange]:
    """The files changed from checkpoint ``start`` to ``end`` (or to the folder now), in one git call."""
    args = ["diff", "--raw", "--numstat", "-z", "--no-renames", "--no-color"]
    if end is not None:
        return checkpoint_records.changes(_git(project, [*args, start, end]))
    return list(
        _with_now(
            project,
            lambda index: checkpoint_records.changes(_git(project, [*args, "--cached", start], index)),
        )
    )


def file_diff(project: Project, start: str, end: str | None, path: str) -> str:
    """One file's unified diff from ``start`` to ``end`` (or to now)."""
    args = ["diff", "--no-renames", "--no-color", "--no-ext-diff"]
    if end is not None:
        return _git(project, [*args, start, end, "--", path])
    return str(_with_now(project, lambda index: _git(project, [*args, "--cached", start, "--", path], index)))


def snapshot(project: Project, reason: str) -> str:
    """The agent's checkpoint of the folder now (none is added when nothing changed since its newest,
    which then holds the state now); its hash."""
    manager = agent_runtime.checkpoint_manager()
    manager._take(str(project.folder), reason)
    newest = points(project)
    if not newest:
        raise ApiError("The agent could not take a checkpoint of the state before the restore", status=500)
    tip = newest[-1].hash
    if changes(project, tip, None):
        raise ApiError("The agent could not take a checkpoint of the state before the restore", status=500)
    return tip


def tree_of(project: Project, commit: str) -> str | None:
    """The tree a checkpoint holds: what a restore reads, since the snapshot taken before the restore may make
    the agent rebuild the folder's history (new commit hashes, the old ones collected)."""
    ok, out, _err = _cm()._run_git(
        ["rev-parse", "--verify", "-q", f"{commit}^{{tree}}"],
        _store(),
        str(project.folder),
        allowed_returncodes={1, 128},
    )
    return str(out) if ok and checkpoint_records.is_commit_hash(str(out)) else None


def has_object(project: Project, name: str) -> bool:
    ok, _out, _err = _cm()._run_git(
        ["cat-file", "-e", name], _store(), str(project.folder), allowed_returncodes={1, 128}
    )
    return bool(ok)


def has_commit(project: Project, commit: str) -> bool:
    ok, out, _err = _cm()._run_git(
        ["cat-file", "-t", commit], _store(), str(project.folder), allowed_returncodes={1, 128}
    )
    return bool(ok) and str(out) == "commit"


def restore_files(project: Project, commit: str, paths: list[str]) -> int:
    """Puts each path back as ``commit`` (a checkpoint or its tree) holds it: checked out when it has it,
    removed when it did not exist then. The count of paths put back."""
    if not paths:
        return 0
    held = set(_git(project, ["ls-tree", "-r", "-z", "--name-only", commit, "--", *paths]).split("\0"))
    present = [path for path in paths if path in held]
    index = Path(_cm()._index_path(_store(), project.key))
    for i in range(0, len(present), _PATHS_PER_CALL):
        _git(project, ["checkout", commit, "--", *present[i : i + _PATHS_PER_CALL]], index)
    for path in paths:
        if path not in held:
            _remove(project.folder, path)
    return len(paths)


def _remove(folder: Path, path: str) -> None:
    # A file the checkpoint did not hold: unlinked (never followed), then its emptied folders up to the project.
    target = folder / path
    if not target.parent.resolve().is_relative_to(folder):
        return
    if target.is_symlink() or target.is_file():
        target.unlink()
    parent = target.parent
    while parent != folder and parent.is_relative_to(folder):
        try:
            os.rmdir(parent)
        except OSError:
            break
        parent = parent.parent

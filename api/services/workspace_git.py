"""A git workspace's own state for the files panel: ``git status`` (what is changed, added, deleted or new
against HEAD) and the diff of the working tree against HEAD, of one file or all. Git runs read-only
(``--no-optional-locks``, no pager, no external diff or text conversion), under a deadline, and its output
is bounded; for a session in another execution environment it runs on that host (``remote_git``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from api.rules import git_porcelain
from api.rules.errors import BadRequest, NotFound
from api.services import environment_shell, environment_workers, git_run, media, remote_git, workspace_files
from api.store import models

DIFF_MAX_CHARS = git_porcelain.DIFF_MAX_CHARS


def _git(workspace: Path, *args: str) -> str:
    return git_run.run_git(workspace, *args)


def _repository(sid: str, store: models.Store | None) -> Path:
    workspace = media.session_workspace(sid, store=store)
    if not workspace.is_dir():
        raise NotFound("This session's workspace folder does not exist")
    try:
        inside = _git(workspace, "rev-parse", "--is-inside-work-tree").strip() == "true"
    except BadRequest:
        inside = False
    if not inside:
        raise NotFound("This workspace is not a git repository")
    return workspace


def status(
    sid: str,
    *,
    store: models.Store | None = None,
    environment_pools: environment_workers.EnvironmentPools | None = None,
) -> dict[str, Any]:
    """``{branch, entries: [{path, state, staged?}], truncated}`` against HEAD; a remote session's work tree
    is asked on its host."""
    remote = environment_shell.where(sid, store=store, environment_pools=environment_pools)
    if remote is not None:
        return remote_git.status(remote)
    workspace = _repository(sid, store)
    branch = _git(workspace, "rev-parse", "--abbrev-ref", "HEAD").strip()
    raw = _git(workspace, "status", "--porcelain=v1", "-z", "--untracked-files=all")
    return {"branch": branch, **git_porcelain.entries(raw)}


def diff(
    sid: str,
    relative: Any = None,
    *,
    store: models.Store | None = None,
    environment_pools: environment_workers.EnvironmentPools | None = None,
) -> dict[str, Any]:
    """The working tree against HEAD, of one file (inside the workspace) or all; bounded."""
    remote = environment_shell.where(sid, store=store, environment_pools=environment_pools)
    if remote is not None:
        return remote_git.diff(remote, relative)
    workspace = _repository(sid, store)
    args = ["diff", "--no-color", "--no-ext-diff", "--no-textconv", "HEAD"]
    if relative not in (None, ""):
        _workspace, path = workspace_files.resolve_target(sid, relative, store=store)
        args += ["--", str(path.relative_to(workspace))]
    text = _git(workspace, *args)
    return {"diff": text[:DIFF_MAX_CHARS], "truncated": len(text) > DIFF_MAX_CHARS}

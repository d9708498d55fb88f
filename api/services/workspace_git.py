"""A git workspace's own state for the files panel: ``git status`` (what is changed, added, deleted or new
against HEAD) and the diff of the working tree against HEAD, of one file or all. Git runs read-only
(``--no-optional-locks``, no pager, no external diff or text conversion), under a deadline, and its output
is bounded."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from api.rules.errors import BadRequest, NotFound
from api.services import git_run, media, workspace_files

STATUS_MAX = 5_000  # entries
DIFF_MAX_CHARS = 400_000
# Porcelain status letters → words.
_STATES = {
    "M": "modified",
    "A": "added",
    "D": "deleted",
    "R": "renamed",
    "C": "copied",
    "T": "type changed",
    "U": "conflict",
}


def _git(workspace: Path, *args: str) -> str:
    return git_run.run_git(workspace, *args)


def _repository(sid: str) -> Path:
    workspace = media.session_workspace(sid)
    if not workspace.is_dir():
        raise NotFound("This session's workspace folder does not exist")
    try:
        inside = _git(workspace, "rev-parse", "--is-inside-work-tree").strip() == "true"
    except BadRequest:
        inside = False
    if not inside:
        raise NotFound("This workspace is not a git repository")
    return workspace


def _entry(line: str) -> dict[str, str]:
    index, tree, path = line[0], line[1], line[3:]
    if index == "?":
        return {"path": path, "state": "new"}
    letter = tree if tree != " " else index
    return {"path": path, "state": _STATES.get(letter, "changed"), "staged": "yes" if index != " " else "no"}


def status(sid: str) -> dict[str, Any]:
    """``{branch, entries: [{path, state, staged?}], truncated}`` against HEAD."""
    workspace = _repository(sid)
    branch = _git(workspace, "rev-parse", "--abbrev-ref", "HEAD").strip()
    raw = _git(workspace, "status", "--porcelain=v1", "-z", "--untracked-files=all")
    items = [item for item in raw.split("\0") if item]
    entries: list[dict[str, str]] = []
    skip_next = False
    for item in items:
        if skip_next:  # a rename's or copy's source path follows it
            skip_next = False
            continue
        if item[:1] in ("R", "C"):
            skip_next = True
        entries.append(_entry(item))
        if len(entries) >= STATUS_MAX:
            break
    return {"branch": branch, "entries": entries, "truncated": len(items) > len(entries)}


def diff(sid: str, relative: Any = None) -> dict[str, Any]:
    """The working tree against HEAD, of one file (inside the workspace) or all; bounded."""
    workspace = _repository(sid)
    args = ["diff", "--no-color", "--no-ext-diff", "--no-textconv", "HEAD"]
    if relative not in (None, ""):
        _workspace, path = workspace_files.resolve_target(sid, relative)
        args += ["--", str(path.relative_to(workspace))]
    text = _git(workspace, *args)
    return {"diff": text[:DIFF_MAX_CHARS], "truncated": len(text) > DIFF_MAX_CHARS}

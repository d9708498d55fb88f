"""What the agent changed in a session's workspace, from the agent's own per-turn checkpoints (its shadow git
store, ``tools.checkpoint_manager``): the checkpoints newest first with their size, the diff from one to
the workspace as it is now, and a restore of the whole workspace or one file to a checkpoint. The agent
takes a checkpoint of the current state before it restores, so every restore can itself be undone. A session in
another execution environment reads the store kept on its host the same way (``remote_checkpoints``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from api.agent import agent_runtime
from api.rules import checkpoint_records, remote_output
from api.rules.errors import BadRequest, NotFound
from api.services import checkpoint_keepers, environment_workers, media, remote_checkpoints
from api.store import models

DIFF_MAX_CHARS = 400_000  # a larger diff is cut, and the answer says so


def _workspace(sid: str, store: models.Store | None) -> str:
    folder = media.session_workspace(sid, store=store)
    if not folder.is_dir():
        raise NotFound("This session's workspace folder does not exist")
    return str(folder)


def _clean_hash(value: Any) -> str:
    if not checkpoint_records.is_commit_hash(value):
        raise BadRequest("hash must name a checkpoint (hexadecimal)")
    return value


Pools = environment_workers.EnvironmentPools


def list_checkpoints(
    sid: str, *, store: models.Store | None = None, environment_pools: Pools | None = None
) -> dict[str, Any]:
    """``{workspace, checkpoints: [{hash, short_hash, timestamp, reason, files_changed, insertions,
    deletions}]}``, newest first (the counts are of the change from the checkpoint before it)."""
    keeper = checkpoint_keepers.on_host(sid, store=store, environment_pools=environment_pools)
    if keeper is not None:
        return remote_checkpoints.list_checkpoints(keeper)
    workspace = _workspace(sid, store)
    rows = agent_runtime.checkpoint_manager().list_checkpoints(workspace)
    return {"workspace": workspace, "checkpoints": rows}


def diff(
    sid: str, commit: Any, *, store: models.Store | None = None, environment_pools: Pools | None = None
) -> dict[str, Any]:
    """What changed from the checkpoint to the workspace now: a summary and a unified diff (bounded)."""
    keeper = checkpoint_keepers.on_host(sid, store=store, environment_pools=environment_pools)
    if keeper is not None:
        stat, text = remote_checkpoints.diff_to_now(keeper, _clean_hash(commit))
    else:
        found = agent_runtime.checkpoint_manager().diff(_workspace(sid, store), _clean_hash(commit))
        if not found.get("success"):
            raise NotFound(str(found.get("error") or "No such checkpoint"))
        stat, text = str(found.get("stat") or ""), str(found.get("diff") or "")
    return {
        "hash": commit,
        "stat": stat,
        "diff": text[:DIFF_MAX_CHARS],
        "truncated": len(text) > DIFF_MAX_CHARS,
    }


def restore(
    sid: str,
    commit: Any,
    path: Any = None,
    *,
    store: models.Store | None = None,
    environment_pools: Pools | None = None,
) -> dict[str, Any]:
    """Put the workspace (or one file of it) back as the checkpoint holds it; the state just before is kept
    as a new checkpoint, the one to restore to undo this."""
    keeper = checkpoint_keepers.on_host(sid, store=store, environment_pools=environment_pools)
    if keeper is not None:
        relative = None if path in (None, "") else remote_output.checked_relative(path)
        undo_hash = remote_checkpoints.restore(keeper, _clean_hash(commit), relative)
        return {"restored_to": commit, "path": relative, "undo_hash": undo_hash}
    workspace = _workspace(sid, store)
    relative = None
    if path not in (None, ""):
        relative = str(media.resolve_in_workspace(Path(workspace), path).relative_to(workspace))
    manager = agent_runtime.checkpoint_manager()
    result = manager.restore(workspace, _clean_hash(commit), relative)
    if not result.get("success"):
        raise BadRequest(str(result.get("error") or "The restore failed"))
    newest = manager.list_checkpoints(workspace)
    undo = (
        newest[0]["hash"] if newest and str(newest[0].get("reason", "")).startswith("pre-rollback") else None
    )
    return {"restored_to": commit, "path": relative, "undo_hash": undo}

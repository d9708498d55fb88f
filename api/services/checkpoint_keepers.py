"""Where a session's checkpoints are kept, behind one face for the changes view (``api.services.turn_changes``):
the agent's own store on this machine for a local session (``api.agent.checkpoint_store``), the store kept
on the host for a session in another execution environment (``api.services.remote_checkpoints``)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from api.agent import agent_runtime, checkpoint_store
from api.agent.checkpoint_store import Project, Range
from api.rules.checkpoint_records import FileChange, Point
from api.rules.errors import Conflict, NotFound
from api.services import environment_shell, environment_workers, media, remote_checkpoints
from api.store import models


class Keeper(Protocol):
    """A session's checkpoint store: what the changes view reads and restores through."""

    def histories(self) -> dict[Project, list[Point]]:
        """Each checkpointed folder of the workspace with its checkpoints whose time can be trusted, oldest
        first."""
        ...

    def changes(self, ranges: Sequence[Range]) -> list[list[FileChange]]:
        """The files changed in each range."""
        ...

    def file_diff(self, part: Range, path: str) -> str: ...

    def has_commit(self, project: Project, commit: str) -> bool: ...

    def pinned(self, project: Project, commit: str) -> str:
        """What to restore ``commit``'s files from once a snapshot has been taken after it (which may cut the
        folder's history): the checkpoint itself, or its tree."""
        ...

    def put_back(self, project: Project, source: str, paths: list[str], reason: str) -> tuple[str, int]:
        """A checkpoint of the folder now (``reason``; the newest when nothing changed since), then each path put
        back as ``source`` (what ``pinned`` answered) holds it, removed when it did not exist then:
        ``(the checkpoint's hash, the count put back)``."""
        ...

    def check_path(self, path: Any) -> None:
        """Refuses a path from the page that is not a plain path inside the workspace."""
        ...


def dated(history: list[Point], kept: int) -> list[Point]:
    """The checkpoints whose time can be trusted. Past ``kept`` checkpoints the agent rebuilds the folder's
    history at each new one, and every rebuilt checkpoint carries the time of the rebuild: such a history
    (full, all within a couple of seconds) keeps only its newest, the one taken then."""
    rebuilt = len(history) >= max(2, kept) and history[-1].at - history[0].at <= 2
    return history[-1:] if rebuilt else history


class LocalKeeper:
    """The agent's own store, for a workspace on this machine."""

    def __init__(self, workspace: Path) -> None:
        self.workspace = workspace

    def histories(self) -> dict[Project, list[Point]]:
        kept = checkpoint_store.kept_per_folder()
        return {
            project: dated(checkpoint_store.points(project), kept)
            for project in checkpoint_store.projects_in(self.workspace)
        }

    def changes(self, ranges: Sequence[Range]) -> list[list[FileChange]]:
        return [checkpoint_store.changes(part.project, part.start, part.end) for part in ranges]

    def file_diff(self, part: Range, path: str) -> str:
        return checkpoint_store.file_diff(part.project, part.start, part.end, path)

    def has_commit(self, project: Project, commit: str) -> bool:
        return checkpoint_store.has_commit(project, commit)

    def pinned(self, project: Project, commit: str) -> str:
        # The agent's snapshot past its limit rebuilds the history and collects the old commits at once; the
        # trees it keeps are the same.
        tree = checkpoint_store.tree_of(project, commit)
        if tree is None:
            raise NotFound("No such checkpoint")
        return tree

    def put_back(self, project: Project, source: str, paths: list[str], reason: str) -> tuple[str, int]:
        kept = checkpoint_store.snapshot(project, reason)
        if not checkpoint_store.has_object(project, source):
            raise Conflict(
                "The agent dropped this checkpoint while it made room for the one before the restore (it keeps "
                f"{checkpoint_store.kept_per_folder()} per folder): nothing was restored"
            )
        return kept, checkpoint_store.restore_files(project, source, paths)

    def check_path(self, path: Any) -> None:
        media.resolve_in_workspace(self.workspace, path)


def on_host(
    sid: str,
    *,
    store: models.Store | None = None,
    environment_pools: environment_workers.EnvironmentPools | None = None,
) -> remote_checkpoints.HostKeeper | None:
    """The store on a remote session's host (its commands run by the workers of ``environment_pools``), or None
    for a session on this machine."""
    place = environment_shell.where(sid, store=store, environment_pools=environment_pools)
    return None if place is None else remote_checkpoints.HostKeeper(place, agent_runtime.checkpoint_limits())


def keeper_for(
    sid: str,
    *,
    store: models.Store | None = None,
    environment_pools: environment_workers.EnvironmentPools | None = None,
) -> Keeper:
    """The store of the session's checkpoints: on its host for a remote session (its commands run by the
    workers of ``environment_pools``), the agent's here for a local one."""
    on_its_host = on_host(sid, store=store, environment_pools=environment_pools)
    if on_its_host is not None:
        return on_its_host
    workspace = media.session_workspace(sid, store=store)
    if not workspace.is_dir():
        raise NotFound("This session's workspace folder does not exist")
    return LocalKeeper(workspace)

"""The files of a session's workspace for the files panel: list a folder, preview or download a file,
save an edit, create, rename and delete (into a trash, restorable until emptied).

Everything stays inside the session's workspace once links are resolved: a path is checked with
``media.resolve_in_workspace`` before anything is opened, and a link that points out of the workspace is
listed (``link: "outside"``) but never followed. Reads open the file once and judge it on that
descriptor (``safe_read``: no FIFO, device or link, and the opened file inside the workspace), and every
read has a size limit. A save names the version it was opened at and is
refused with both texts when the file changed since (409). Writes go through ``atomic``.
"""

from __future__ import annotations

import functools
import os
import shutil
import stat
import time
import uuid
from pathlib import Path, PurePosixPath
from typing import Any

from api.agent import agent_memory
from api.rules.errors import ApiError, BadRequest, Conflict, Forbidden, NotFound, PayloadTooLarge
from api.services import (
    environment_shell,
    environment_workers,
    file_preview,
    git_run,
    media,
    remote_edit,
    remote_files,
    remote_trash,
    remote_writes,
)
from api.store import atomic, config, models, safe_read

LIST_MAX = 20_000  # entries of one folder; more are cut, and the answer says so
PREVIEW_MAX = file_preview.PREVIEW_MAX  # bytes of a file shown in the panel
RAW_MAX = 64 * 1024 * 1024  # bytes of a file downloaded or shown raw


def relative_path(workspace: Path, path: Path) -> str:
    return path.relative_to(workspace).as_posix() if path != workspace else ""


def resolve_target(
    sid: str, relative: Any, *, allow_root: bool = False, store: models.Store | None = None
) -> tuple[Path, Path]:
    """``(workspace, path)`` for a path from the page; the root itself only where ``allow_root``."""
    workspace = media.session_workspace(sid, store=store)
    if not workspace.is_dir():
        raise NotFound("This session's workspace folder does not exist")
    if allow_root and (relative in (None, "", ".", "/")):
        return workspace, workspace
    return workspace, media.resolve_in_workspace(workspace, relative)


def _entry(workspace: Path, folder: Path, prefix: str, item: os.DirEntry[str]) -> dict[str, Any]:
    row: dict[str, Any] = {"name": item.name, "path": prefix + item.name}
    try:
        info = item.stat(follow_symlinks=False)
    except OSError:
        return {**row, "type": "unreadable"}
    if stat.S_ISLNK(info.st_mode):
        try:
            real = Path(os.path.realpath(folder / item.name))
        except OSError:
            real = None
        inside = real is not None and real.is_relative_to(workspace)
        row["link"] = "inside" if inside else "outside"
        row["type"] = "dir" if inside and real is not None and real.is_dir() else "link"
        return row
    if stat.S_ISDIR(info.st_mode):
        return {**row, "type": "dir", "mtime": info.st_mtime}
    if stat.S_ISREG(info.st_mode):
        return {**row, "type": "file", "size": info.st_size, "mtime": info.st_mtime}
    return {**row, "type": "special"}  # FIFO, socket, device: shown, never opened


def _in_git_work_tree(folder: Path) -> bool:
    return any((parent / ".git").exists() for parent in (folder, *folder.parents))


def _git_ignored(folder: Path, names: list[str]) -> set[str]:
    """The names in ``folder`` its git repository ignores (``.gitignore``, ``info/exclude``), one git call;
    none outside a repository or when git cannot say."""
    if not names or not _in_git_work_tree(folder):
        return set()
    listed = "\0".join(names).encode("utf-8", "surrogateescape") + b"\0"
    try:
        out = git_run.run_git(folder, "check-ignore", "--stdin", "-z", stdin=listed, ok_codes=(0, 1))
    except ApiError:
        return set()
    return {name.rstrip("/") for name in out.split("\0") if name}


def list_folder(
    sid: str,
    relative: Any = "",
    show_hidden: bool = False,
    *,
    store: models.Store | None = None,
    environment_pools: environment_workers.EnvironmentPools | None = None,
) -> dict[str, Any]:
    """One folder's entries, folders first, each with its type (a link says whether it points inside); a
    remote session's folder is listed on its host."""
    remote = environment_shell.where(sid, store=store, environment_pools=environment_pools)
    if remote is not None:
        return remote_files.list_folder(remote, relative, show_hidden)
    workspace, folder = resolve_target(sid, relative, allow_root=True, store=store)
    if not folder.is_dir():
        raise BadRequest("path is not a folder")
    entries: list[dict[str, Any]] = []
    hidden = 0
    truncated = False
    prefix = relative_path(workspace, folder)
    prefix = f"{prefix}/" if prefix else ""
    with os.scandir(folder) as found:
        for item in found:
            if atomic.unfinished_write(item.name, functools.partial(item.stat, follow_symlinks=False)):
                continue  # a write's temp file, never a file of the workspace (a killed one's is swept)
            if not show_hidden and file_preview.is_hidden(item.name):
                hidden += 1
                continue
            if len(entries) >= LIST_MAX:
                truncated = True
                break
            entries.append(_entry(workspace, folder, prefix, item))
    if not show_hidden:
        ignored = _git_ignored(folder, [row["name"] for row in entries])
        if ignored:
            entries = [row for row in entries if row["name"] not in ignored]
            hidden += len(ignored)
    entries.sort(key=lambda row: (row["type"] != "dir", row["name"].lower()))
    return {
        "workspace": str(workspace),
        "path": relative_path(workspace, folder),
        "entries": entries,
        "hidden": hidden,
        "truncated": truncated,
    }


def _open_regular(path: Path, limit: int, workspace: Path) -> tuple[os.stat_result, bytes]:
    """The file's stat and at most ``limit`` bytes, opened once (``safe_read``: no link, no FIFO, no device,
    and the opened file itself inside the workspace)."""
    try:
        found = safe_read.read_regular_file(path, inside=workspace, limit=limit)
    except safe_read.UnsafeFile as exc:
        raise Forbidden(f"This file is not opened here: {exc.problem}") from None
    except OSError as exc:
        raise Forbidden(f"This file cannot be opened: {os.strerror(exc.errno or 0)}") from None
    if found is None:
        raise NotFound("No such file")
    return found


def read_file(
    sid: str,
    relative: Any,
    *,
    store: models.Store | None = None,
    environment_pools: environment_workers.EnvironmentPools | None = None,
) -> dict[str, Any]:
    """A file for the panel (``file_preview.preview``); a remote session's is read on its host."""
    remote = environment_shell.where(sid, store=store, environment_pools=environment_pools)
    if remote is not None:
        return remote_files.read_file(remote, relative)
    workspace, path = resolve_target(sid, relative, store=store)
    info, data = _open_regular(path, PREVIEW_MAX + 1, workspace)
    return file_preview.preview(relative_path(workspace, path), path.name, info.st_size, info.st_mtime, data)


def raw_file(
    sid: str,
    relative: Any,
    *,
    store: models.Store | None = None,
    environment_pools: environment_workers.EnvironmentPools | None = None,
) -> tuple[bytes, str, str]:
    """``(bytes, content type, file name)`` of a file to download or show raw (images and PDFs inline)."""
    remote = environment_shell.where(sid, store=store, environment_pools=environment_pools)
    if remote is not None:
        return remote_files.raw_file(remote, relative)
    workspace, path = resolve_target(sid, relative, store=store)
    info, data = _open_regular(path, RAW_MAX + 1, workspace)
    if info.st_size > RAW_MAX or len(data) > RAW_MAX:
        raise PayloadTooLarge(f"Files over {RAW_MAX // (1024 * 1024)} MB are not served here")
    return data, file_preview.content_type(path.name, data), path.name


def read_image(
    sid: str,
    relative: Any,
    *,
    store: models.Store | None = None,
    environment_pools: environment_workers.EnvironmentPools | None = None,
) -> tuple[bytes, str]:
    """``(bytes, content type)`` of an image for the transcript (``media.read_media``); a remote session's is
    read on its host."""
    remote = environment_shell.where(sid, store=store, environment_pools=environment_pools)
    if remote is not None:
        return remote_files.read_image(remote, relative, int(config.setting("attachment_max_bytes")))
    return media.read_media(sid, relative, store=store)


def save_file(
    sid: str,
    relative: Any,
    content: Any,
    base_version: Any,
    *,
    store: models.Store | None = None,
    environment_pools: environment_workers.EnvironmentPools | None = None,
) -> dict[str, Any]:
    """Replace a text file with ``content`` if it is still at ``base_version`` (``""``: it must not exist);
    a remote session's is written on its host (``remote_edit``)."""
    if not isinstance(content, str) or not isinstance(base_version, str):
        raise BadRequest("content must be text and base_version the version the file was opened at")
    data = content.encode("utf-8")
    if len(data) > PREVIEW_MAX:
        raise PayloadTooLarge(f"Files over {PREVIEW_MAX // 1024} KB are not edited here")
    remote = environment_shell.where(sid, store=store, environment_pools=environment_pools)
    if remote is not None:
        media.clean_name(PurePosixPath(str(relative)).name)
        return remote_edit.save_file(remote, relative, content, base_version)
    workspace, path = resolve_target(sid, relative, store=store)
    media.clean_name(path.name)
    current = agent_memory.read_bytes(path)
    if agent_memory.version_of(current) != base_version:
        raise Conflict(
            f"{path.name} changed since you opened it.",
            current={
                "content": (current or b"").decode("utf-8", "replace"),
                "version": agent_memory.version_of(current),
            },
            yours=content,
        )
    atomic.sweep_once(path.parent, swept=models.store(store).swept)
    atomic.write_bytes_durable(path, data)
    return {
        "path": relative_path(workspace, path),
        "version": agent_memory.version_of(data),
        "size": len(data),
    }


def create(
    sid: str,
    relative: Any,
    kind: Any,
    *,
    store: models.Store | None = None,
    environment_pools: environment_workers.EnvironmentPools | None = None,
) -> dict[str, Any]:
    """A new empty file or folder; an existing name is refused, never replaced (a remote session's, there)."""
    remote = environment_shell.where(sid, store=store, environment_pools=environment_pools)
    if remote is not None:
        return remote_writes.create(remote, relative, kind)
    workspace, path = resolve_target(sid, relative, store=store)
    media.clean_name(path.name)
    if kind not in ("file", "dir"):
        raise BadRequest('kind must be "file" or "dir"')
    try:
        if kind == "dir":
            path.mkdir()
        else:
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644))
    except FileExistsError:
        raise Conflict(f"{path.name} already exists") from None
    except FileNotFoundError:
        raise NotFound("The folder to create it in does not exist") from None
    atomic.fsync_dir(path.parent)
    return {"path": relative_path(workspace, path), "type": kind}


def rename(
    sid: str,
    relative: Any,
    new_relative: Any,
    *,
    store: models.Store | None = None,
    environment_pools: environment_workers.EnvironmentPools | None = None,
) -> dict[str, Any]:
    """Rename or move a file or folder inside the workspace; an existing target is refused."""
    remote = environment_shell.where(sid, store=store, environment_pools=environment_pools)
    if remote is not None:
        return remote_writes.rename(remote, relative, new_relative)
    workspace, source = resolve_target(sid, relative, store=store)
    _workspace, target = resolve_target(sid, new_relative, store=store)
    media.clean_name(target.name)
    if source == workspace:
        raise Forbidden("The workspace itself is not renamed here")
    if not os.path.lexists(source):
        raise NotFound("No such file or folder")
    if target.is_relative_to(source):
        raise BadRequest("A folder cannot move into itself")
    if os.path.lexists(target):
        raise Conflict(f"{target.name} already exists")
    try:
        if source.is_file() and not source.is_symlink():
            os.link(source, target)  # claims the name without replacing anything
            os.unlink(source)
        else:
            os.rename(source, target)
    except FileExistsError:
        raise Conflict(f"{target.name} already exists") from None
    except FileNotFoundError:
        raise NotFound("The destination folder does not exist") from None
    atomic.fsync_dir(target.parent)
    if source.parent != target.parent:
        atomic.fsync_dir(source.parent)
    return {"path": relative_path(workspace, target)}


# ---------------------------------------------------------------------- the trash


def _trash_dir(sid: str, store: models.Store | None) -> Path:
    media.session_workspace(
        sid, store=store
    )  # a known session (its id is safe as a folder name), or NotFound
    return models.store(store).session_dir.parent / "trash" / sid  # the state folder of the session's store


def delete(
    sid: str,
    relative: Any,
    *,
    store: models.Store | None = None,
    environment_pools: environment_workers.EnvironmentPools | None = None,
) -> dict[str, Any]:
    """Move a file or folder into the session's trash (in the state folder; a remote session's on its host),
    whence it can be restored."""
    remote = environment_shell.where(sid, store=store, environment_pools=environment_pools)
    if remote is not None:
        return remote_trash.delete(remote, sid, relative)
    workspace, path = resolve_target(sid, relative, store=store)
    if path == workspace:
        raise Forbidden("The workspace itself is not deleted here")
    if not os.path.lexists(path):
        raise NotFound("No such file or folder")
    item_id = f"{int(time.time() * 1000)}-{uuid.uuid4().hex[:8]}"
    holder = _trash_dir(sid, store) / item_id
    holder.mkdir(parents=True)
    original = relative_path(workspace, path)
    atomic.write_bytes_durable(holder / "origin.txt", original.encode("utf-8"))
    shutil.move(str(path), str(holder / "item"))
    atomic.fsync_dir(path.parent)
    return {"trash_id": item_id, "path": original}


def trash(
    sid: str,
    *,
    store: models.Store | None = None,
    environment_pools: environment_workers.EnvironmentPools | None = None,
) -> dict[str, Any]:
    """What the session's trash holds, newest first."""
    remote = environment_shell.where(sid, store=store, environment_pools=environment_pools)
    if remote is not None:
        return remote_trash.trash(remote, sid)
    folder = _trash_dir(sid, store)
    rows = []
    if folder.is_dir():
        for holder in sorted(folder.iterdir(), reverse=True):
            origin = agent_memory.read_bytes(holder / "origin.txt")
            if origin is None or not os.path.lexists(holder / "item"):
                continue
            rows.append({"trash_id": holder.name, "path": origin.decode("utf-8", "replace")})
    return {"items": rows}


def restore(
    sid: str,
    item_id: Any,
    *,
    store: models.Store | None = None,
    environment_pools: environment_workers.EnvironmentPools | None = None,
) -> dict[str, Any]:
    """Put a deleted file or folder back where it was; refused when something took its place."""
    remote = environment_shell.where(sid, store=store, environment_pools=environment_pools)
    if remote is not None:
        return remote_trash.restore(remote, sid, item_id)
    if not isinstance(item_id, str) or not item_id or "/" in item_id or item_id.startswith("."):
        raise BadRequest("trash_id must name an item of the trash")
    holder = _trash_dir(sid, store) / item_id
    origin = agent_memory.read_bytes(holder / "origin.txt")
    if origin is None or not os.path.lexists(holder / "item"):
        raise NotFound("No such item in the trash")
    workspace, path = resolve_target(sid, origin.decode("utf-8"), store=store)
    if os.path.lexists(path):
        raise Conflict(f"{path.name} exists again; rename it first")
    path.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(str(holder / "item"), str(path))
    shutil.rmtree(holder, ignore_errors=True)
    atomic.fsync_dir(path.parent)
    return {"path": relative_path(workspace, path)}


def empty_trash(
    sid: str,
    *,
    store: models.Store | None = None,
    environment_pools: environment_workers.EnvironmentPools | None = None,
) -> dict[str, Any]:
    remote = environment_shell.where(sid, store=store, environment_pools=environment_pools)
    if remote is not None:
        return remote_trash.empty_trash(remote, sid)
    folder = _trash_dir(sid, store)
    count = len(trash(sid, store=store)["items"])
    shutil.rmtree(folder, ignore_errors=True)
    return {"emptied": count}

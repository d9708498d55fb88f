"""Files in and out of a session's workspace as wholes: a folder downloaded as a zip, written while it is
sent, and a file uploaded into a folder of the workspace.

A folder's zip is planned before a byte is sent: the folder is walked once (``os.fwalk``, which never
follows a link and holds each folder open while it reads it) to count its files and bytes, so a folder over
``folder_download_max_bytes`` or ``ZIP_ENTRIES_MAX`` is refused with a clear error (413). Then it is walked
again and each file is copied into the zip as it is read, a chunk at a time, so neither the folder nor the
zip is ever held in memory. Links are not followed and not stored (a link may point out of the
workspace); FIFOs, sockets and devices are skipped without being opened for long, and a file is opened
without following a link and checked to be regular on its descriptor. The bound holds while writing too:
a file that grew since the plan past what is left of the bound is skipped.

An upload names a folder and a file name. The folder is reached from the workspace one component at a
time without following a link (``atomic.open_folder_inside``) and the file is written through that
descriptor with ``atomic.write_new_durable``, which claims the name only if nothing holds it: an existing
name is a 409 (or, when the person chose to keep both, the next free ``name-1.ext``), never replaced.
"""

from __future__ import annotations

import errno
import functools
import itertools
import os
import stat
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from api.rules import zip_entries
from api.rules.errors import BadRequest, Conflict, Forbidden, NotFound, PayloadTooLarge
from api.services import (
    attachments,
    environment_shell,
    environment_workers,
    file_preview,
    media,
    remote_files,
    remote_writes,
    remote_zip,
    workspace_files,
)
from api.services.environment_shell import Where
from api.store import atomic, config, models

ZIP_ENTRIES_MAX = 100_000  # files and folders in one zip
COPY_CHUNK = 1 << 20
_OPEN_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)


def _walk(folder: Path, show_hidden: bool) -> Iterator[tuple[str, list[str], list[str], int]]:
    """``os.fwalk`` of ``folder`` without links, hidden and ignored entries left out unless asked for."""
    for top, dirs, files, dir_fd in os.fwalk(folder, follow_symlinks=False):
        files[:] = [name for name in files if not _unfinished_write(name, dir_fd)]
        if not show_hidden:
            dirs[:] = [name for name in dirs if not file_preview.is_hidden(name)]
            files = [name for name in files if not file_preview.is_hidden(name)]
        yield top, dirs, files, dir_fd


def _folder(sid: str, relative: Any, store: models.Store | None) -> tuple[Path, Path]:
    """``(workspace, folder)`` for a folder path from the page (links resolved, inside the workspace)."""
    workspace, folder = workspace_files.resolve_target(sid, relative, allow_root=True, store=store)
    if not folder.is_dir():
        if not os.path.lexists(folder):
            raise NotFound("No such folder in the workspace")
        raise BadRequest("path is not a folder")
    return workspace, folder


def _unfinished_write(name: str, dir_fd: int) -> bool:
    return atomic.unfinished_write(
        name, functools.partial(os.stat, name, dir_fd=dir_fd, follow_symlinks=False)
    )


def _regular_size(name: str, dir_fd: int) -> int | None:
    """The size of a regular file in the folder, None for a link, FIFO, socket, device or a vanished name."""
    try:
        info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except OSError:
        return None
    return info.st_size if stat.S_ISREG(info.st_mode) else None


@dataclass
class FolderZip:
    """A folder planned for download: its file name, what the plan counted, and ``write`` (the zip into a
    binary stream that needs no seeking)."""

    folder: Path
    name: str
    show_hidden: bool
    files: int
    total_bytes: int
    limit: int

    def write(self, out: IO[bytes]) -> None:
        left = self.limit
        entries = 0
        with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1) as archive:
            for top, dirs, files, dir_fd in _walk(self.folder, self.show_hidden):
                base = Path(top).relative_to(self.folder)
                prefix = zip_entries.name_in_zip((Path(self.name) / base).as_posix())
                if entries < ZIP_ENTRIES_MAX:
                    entries += 1
                    archive.writestr(zip_entries.folder(prefix, os.fstat(dir_fd).st_mtime), b"")
                for name in sorted(files):
                    if entries >= ZIP_ENTRIES_MAX:
                        break
                    copied = _copy_into(
                        archive, f"{prefix}/{zip_entries.name_in_zip(name)}", name, dir_fd, left
                    )
                    if copied is not None:
                        left -= copied
                        entries += 1
                dirs.sort()


def _copy_into(archive: zipfile.ZipFile, arcname: str, name: str, dir_fd: int, left: int) -> int | None:
    """Copy one regular file into the zip, read a chunk at a time; its size, or None when it was skipped
    (not a regular file, gone, unreadable, or larger than the ``left`` of the bound)."""
    if _regular_size(name, dir_fd) is None:
        return None  # a device is never opened (an open can act on one); what is swapped in later is
        # opened without blocking and judged on its descriptor below
    try:
        fd = os.open(name, _OPEN_FILE, dir_fd=dir_fd)
    except OSError:
        return None  # a link (ELOOP), gone, unreadable
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > left:
            return None  # a FIFO, socket or device: opened without blocking and never read
        entry = zipfile.ZipInfo(arcname, zip_entries.zip_time(info.st_mtime))
        entry.external_attr = (stat.S_IFREG | (info.st_mode & 0o777)) << 16
        entry.compress_type = zipfile.ZIP_DEFLATED
        entry.file_size = info.st_size  # lets zipfile choose ZIP64 before the data is written
        copied = 0
        with archive.open(entry, "w") as sink:
            while copied < info.st_size:
                chunk = os.read(fd, min(COPY_CHUNK, info.st_size - copied))
                if not chunk:
                    break  # the file shrank meanwhile: the zip holds what it had
                sink.write(chunk)
                copied += len(chunk)
        return copied
    finally:
        os.close(fd)


def folder_zip(
    sid: str,
    relative: Any,
    show_hidden: bool = False,
    *,
    store: models.Store | None = None,
    environment_pools: environment_workers.EnvironmentPools | None = None,
) -> FolderZip | remote_zip.RemoteFolderZip:
    """Plan the download of a workspace folder as a zip (on the session's host for a remote session); 413
    when it holds more than the bounds allow."""
    limit = int(config.setting("folder_download_max_bytes"))
    place = environment_shell.where(sid, store=store, environment_pools=environment_pools)
    if place is not None:
        return remote_zip.folder_zip(place, relative, show_hidden, limit, ZIP_ENTRIES_MAX)
    workspace, folder = _folder(sid, relative, store)
    files = total = entries = 0
    for _top, _dirs, names, dir_fd in _walk(folder, show_hidden):
        entries += 1
        for name in names:
            size = _regular_size(name, dir_fd)
            if size is not None:
                files, total, entries = files + 1, total + size, entries + 1
        if total > limit or entries > ZIP_ENTRIES_MAX:
            break  # the answer is known: no need to walk the rest
    if total > limit:
        raise PayloadTooLarge(
            f"This folder holds more than {limit // (1024 * 1024)} MB of files; download smaller folders",
            limit=limit,
        )
    if entries > ZIP_ENTRIES_MAX:
        raise PayloadTooLarge(f"This folder holds more than {ZIP_ENTRIES_MAX:,} files and folders")
    name = folder.name if folder != workspace else (workspace.name or "workspace")
    return FolderZip(folder, name, show_hidden, files, total, limit)


# ---------------------------------------------------------------------- uploads


def _folder_fd(workspace: Path, folder: Path) -> int:
    parts = folder.relative_to(workspace).parts
    try:
        return atomic.open_folder_inside(workspace, parts)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise Forbidden("The folder to upload into is not a plain folder of the workspace") from None
        if exc.errno == errno.ENOENT:
            raise NotFound("The folder to upload into does not exist") from None
        raise


def upload(
    sid: str,
    relative: Any,
    name: Any,
    data: Any,
    keep_both: Any = False,
    *,
    store: models.Store | None = None,
    environment_pools: environment_workers.EnvironmentPools | None = None,
) -> dict[str, Any]:
    """Write an uploaded file into a workspace folder durably; an existing name → 409 unless ``keep_both``
    (then the next free ``name-1.ext``, …)."""
    if not isinstance(keep_both, bool):
        raise BadRequest("keep_both must be true or false")
    remote = environment_shell.where(sid, store=store, environment_pools=environment_pools)
    if remote is not None:
        return _upload_there(remote, relative, name, data, keep_both)
    workspace, folder = _folder(sid, relative, store)
    clean = media.clean_name(name)
    raw = attachments.decode(data, int(config.setting("upload_max_bytes")), allow_empty=True)
    names: Callable[[], Iterator[str]] = (
        (lambda: attachments.candidate_names(clean)) if keep_both else (lambda: iter([clean]))
    )
    folder_fd = _folder_fd(workspace, folder)
    try:
        atomic.sweep_once(folder, folder_fd, models.store(store).swept)
        stored = atomic.write_new_durable(folder_fd, names(), raw)
    except FileExistsError:
        raise Conflict(f"{clean} already exists in this folder", exists=True, name=clean) from None
    except FileNotFoundError:
        raise NotFound("The folder to upload into was removed") from None
    finally:
        os.close(folder_fd)
    path = folder / stored
    return {"path": workspace_files.relative_path(workspace, path), "name": stored, "size": len(raw)}


def _upload_there(place: Where, relative: Any, name: Any, data: Any, keep_both: bool) -> dict[str, Any]:
    """An upload into a folder of a session's workspace on another host (``remote_writes``), at most what a
    remote read serves."""
    clean = media.clean_name(name)
    limit = min(int(config.setting("upload_max_bytes")), remote_files.RAW_MAX)
    raw = attachments.decode(data, limit, allow_empty=True)
    tries = attachments.REMOTE_NAME_TRIES if keep_both else 1
    names = list(itertools.islice(attachments.candidate_names(clean), tries))
    path, stored = remote_writes.write_new(place, relative, names, raw)
    return {"path": path, "name": stored, "size": len(raw)}

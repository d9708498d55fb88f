"""Durable file writes: temp file in the same folder, flush, fsync, replace, fsync the folder.

A crash at any instant leaves either the old or the new complete file. A temp file is created
exclusively (``O_EXCL|O_NOFOLLOW``) at an unguessable name ``<name>.tmp.<pid>.<random hex>``, so nothing
planted there is written through. ``write_new_durable`` claims a new name without ever replacing a file
(a hard link of the temp file, which fails when the name exists). What a killed write leaves is swept
at start-up (``sweep_leftover_temps``): only names of that form, and only when the process they name is
gone or the file is older than ``TEMP_GRACE_S``. ``STEP_HOOK`` lets crash tests observe (and pause at)
each step between system calls; it is ``None`` in normal runs.
"""

from __future__ import annotations

import errno
import itertools
import logging
import os
import re
import secrets
import stat
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from api.store.in_use import InUse
from api.store.safe_read import read_regular_file

# Called as STEP_HOOK(step, path) at each durable step; crash tests set it in a child process.
STEP_HOOK: Callable[[str, Path], None] | None = None


def _step(name: str, path: Path) -> None:
    hook = STEP_HOOK
    if hook is not None:
        hook(name, path)


log = logging.getLogger("talaria.files")

_NEW_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
_FOLDER_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
_TEMP_NAME = re.compile(r"^.+\.tmp\.(?P<pid>[0-9]{1,10})\.[0-9a-f]{1,40}$")
# A temp file of a live process is left alone unless it is older than this (its pid may be reused).
TEMP_GRACE_S = 600.0
_NAME_ATTEMPTS = 10_000


def temp_name_for(name: str) -> str:
    """An unguessable temp name beside ``name``, naming this process (the start-up sweep reads the pid)."""
    return f"{name}.tmp.{os.getpid()}.{secrets.token_hex(8)}"


def temp_path_for(path: Path) -> Path:
    return path.with_name(temp_name_for(path.name))


def _create_temp(name: str, mode: int, dir_fd: int | None = None) -> tuple[str, int]:
    """``(temp name, descriptor)`` of a new temp file beside ``name``; never opens an existing one."""
    for _ in range(8):
        tmp = temp_name_for(name)
        try:
            return tmp, os.open(tmp, _NEW_FILE_FLAGS, mode, dir_fd=dir_fd)
        except FileExistsError:
            continue  # something already there: another name
    raise FileExistsError(errno.EEXIST, "no free temp name", name)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    _step("dir_fsynced", directory)


def write_bytes_durable(
    path: Path,
    data: bytes,
    *,
    sync_dir: bool = True,
    mode: int = 0o644,
    before_replace: Callable[[os.stat_result], None] | None = None,
) -> os.stat_result:
    """Atomically replace ``path`` with ``data``; on return both file and directory entry are on disk.

    ``mode`` applies from the temp file's creation on, so a secret is never readable by others.
    ``before_replace`` sees the new file's stat (inode, size, mtime survive the rename) before it becomes
    visible, so a caller can recognise its own write the instant it lands. Returns that stat.
    """
    path = Path(path)
    tmp = path  # until the temp file exists, there is nothing to remove on failure
    try:
        tmp_name, fd = _create_temp(str(path), mode)
        tmp = Path(tmp_name)
        try:
            _step("tmp_created", tmp)
            _write_all(fd, data)
            _step("tmp_written", tmp)
            os.fsync(fd)
            _step("tmp_fsynced", tmp)
            st = os.fstat(fd)
        finally:
            os.close(fd)
        if before_replace is not None:
            before_replace(st)
        os.replace(tmp, path)
        _step("replaced", path)
    except BaseException:
        if tmp != path:
            try:
                os.unlink(tmp)
            except OSError:
                pass
        raise
    if sync_dir:
        fsync_dir(path.parent)
    return st


def open_folder(parent: Path, name: str) -> int:
    """A descriptor of the folder ``parent/name``, made when missing; a link there is refused (``ELOOP``).

    Writes through the descriptor (``write_new_durable``) stay in that folder even when the name is
    swapped for a link afterwards.
    """
    parent_fd = os.open(parent, _FOLDER_FLAGS & ~os.O_NOFOLLOW)
    try:
        for _ in range(8):  # another process may move the folder between the mkdir and the open
            try:
                os.mkdir(name, 0o755, dir_fd=parent_fd)
            except FileExistsError:
                pass
            else:
                os.fsync(parent_fd)
            try:
                return os.open(name, _FOLDER_FLAGS, dir_fd=parent_fd)
            except FileNotFoundError:
                continue
            except NotADirectoryError:
                raise OSError(errno.ELOOP, "not a plain folder", name) from None
        raise FileNotFoundError(errno.ENOENT, "the folder keeps disappearing", name)
    finally:
        os.close(parent_fd)


def open_folder_inside(root: Path, parts: Iterable[str]) -> int:
    """A descriptor of the existing folder ``root/part/part/…``, reached one component at a time without
    following a link (``ELOOP`` or ``ENOTDIR`` when one is there, ``ENOENT`` when a folder is missing), so
    what is written through it lands inside ``root`` whatever the names point to meanwhile."""
    fd = os.open(root, _FOLDER_FLAGS & ~os.O_NOFOLLOW)
    try:
        for part in parts:
            inner = os.open(part, _FOLDER_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = inner
    except BaseException:
        os.close(fd)
        raise
    return fd


def write_new_durable(folder_fd: int, names: Iterable[str], data: bytes, *, mode: int = 0o644) -> str:
    """Durably write ``data`` under the first of ``names`` that is free in the folder; that name.

    Nothing is ever replaced: the complete, synced temp file is hard-linked to the name, which fails
    when anything (a file, a link) holds it, and the next name is tried. The temp name is removed.
    """
    candidates = iter(names)
    first = next(candidates)
    tmp, fd = _create_temp(first, mode, folder_fd)
    try:
        try:
            _step("tmp_created", Path(tmp))
            _write_all(fd, data)
            _step("tmp_written", Path(tmp))
            os.fsync(fd)
            _step("tmp_fsynced", Path(tmp))
        finally:
            os.close(fd)
        for count, name in enumerate(itertools.chain([first], candidates)):
            if count >= _NAME_ATTEMPTS:
                break
            try:
                os.link(tmp, name, src_dir_fd=folder_fd, dst_dir_fd=folder_fd, follow_symlinks=False)
            except FileExistsError:
                continue
            _step("linked", Path(name))
            return name
        raise FileExistsError(errno.EEXIST, "no free name", tmp)
    finally:
        try:
            os.unlink(tmp, dir_fd=folder_fd)
        except OSError:
            pass
        os.fsync(folder_fd)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    return True


def is_leftover_temp(name: str, age_s: float, pid_alive: Callable[[int], bool]) -> bool:
    """Whether ``name`` is a temp file a killed write left (pure): our temp form, and its process gone or
    the file older than ``TEMP_GRACE_S``."""
    match = _TEMP_NAME.match(name)
    if match is None:
        return False
    return age_s > TEMP_GRACE_S or not pid_alive(int(match.group("pid")))


def unfinished_write(name: str, stat_of: Callable[[], os.stat_result]) -> bool:
    """Whether a folder's entry ``name`` is the temp file of a write not finished: one in flight in this
    process, or one a killed write left (what the sweep removes). A listing and a folder's zip leave both
    out; ``stat_of`` (the entry's own stat, no link followed) is asked only for a name of the temp form."""
    match = _TEMP_NAME.match(name)
    if match is None:
        return False
    if int(match.group("pid")) == os.getpid():
        return True
    try:
        age_s = time.time() - stat_of().st_mtime
    except OSError:
        return False
    return is_leftover_temp(name, age_s, _pid_alive)


class Swept:
    """The folders a store's writes swept of what killed writes left, each once; a store owns one
    (``Store.swept``) and puts it in use with itself."""

    def __init__(self) -> None:
        self.folders: set[Path] = set()
        self.lock = threading.Lock()

    def first(self, folder: Path) -> bool:
        """Whether ``folder`` is swept now for the first time (it counts as swept from here on)."""
        with self.lock:
            if folder in self.folders:
                return False
            self.folders.add(folder)
            return True


SWEPT: InUse[Swept] = InUse(Swept)  # the store in use's (``session_store.use``)


def sweep_once(folder: Path, folder_fd: int | None = None, swept: Swept | None = None) -> None:
    """The first write into a folder removes what killed writes left there (``swept``: the store in use's
    when None)."""
    if SWEPT.get(swept).first(folder):
        sweep_leftover_temps(folder, folder_fd)


def sweep_leftover_temps(folder: Path, folder_fd: int | None = None) -> list[str]:
    """Remove the temp files killed writes left in ``folder`` (not its subfolders); the names removed.

    With ``folder_fd`` (a descriptor of that folder, from ``open_folder``) the sweep works through it,
    so it stays in that folder whatever its name points to meanwhile.
    """
    try:
        fd = os.open(folder, _FOLDER_FLAGS & ~os.O_NOFOLLOW) if folder_fd is None else os.dup(folder_fd)
    except (FileNotFoundError, NotADirectoryError):
        return []
    swept: list[str] = []
    now = time.time()
    try:
        for name in os.listdir(fd):
            try:
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
                if stat.S_ISDIR(st.st_mode) or not is_leftover_temp(name, now - st.st_mtime, _pid_alive):
                    continue
                os.unlink(name, dir_fd=fd)
            except OSError:
                continue
            swept.append(name)
            log.warning("removed %s in %s, a temp file an interrupted write left", name, folder)
        if swept:
            os.fsync(fd)
    finally:
        os.close(fd)
    return swept


def copy_durable(src: Path, dst: Path, *, sync_dir: bool = True) -> bytes:
    """Durably make ``dst`` a copy of ``src``; returns the bytes copied."""
    found = read_regular_file(Path(src))
    if found is None:
        raise FileNotFoundError(str(src))
    data = found[1]
    write_bytes_durable(Path(dst), data, sync_dir=sync_dir)
    return data


def unix_ms() -> int:
    return time.time_ns() // 1_000_000


def keep_aside(path: Path, tag: str, *, sync_dir: bool = True, link: bool = False) -> Path | None:
    """Durably keep a copy of ``path`` as ``<name>.<tag>-<unix_ms>``.

    A copy, not a hard link: an in-place write by another program must not change what was kept.
    ``link=True`` keeps the current inode by hard link instead (nothing copied; the kept data is exactly
    as durable as the file was); only for a caller that replaces ``path`` right away, so later writes
    through the name reach a new file.

    Returns the kept path, or ``None`` when ``path`` does not exist. With ``sync_dir=False`` the
    caller syncs the folder (once for several keeps) before it replaces ``path``.
    """
    path = Path(path)
    if not path.exists():
        return None
    aside = _aside_name(path, tag)
    if link and not path.is_symlink():
        try:
            os.link(path, aside)
            _step("linked_aside", aside)
            if sync_dir:
                fsync_dir(path.parent)
            return aside
        except OSError:
            pass  # e.g. a file system without hard links: copy instead
    copy_durable(path, aside, sync_dir=sync_dir)
    return aside


def _aside_name(path: Path, tag: str) -> Path:
    stamp = unix_ms()
    while True:
        aside = path.with_name(f"{path.name}.{tag}-{stamp}")
        if not aside.exists():
            return aside
        stamp += 1


def move_aside(path: Path, tag: str) -> Path | None:
    """Durably rename ``path`` to ``<name>.<tag>-<unix_ms>``; None when it does not exist."""
    path = Path(path)
    aside = _aside_name(path, tag)
    try:
        os.rename(path, aside)
    except FileNotFoundError:
        return None
    _step("moved_aside", aside)
    fsync_dir(path.parent)
    return aside


def unlink_durable(path: Path) -> bool:
    """Remove ``path`` and sync its folder; False when it was already gone."""
    path = Path(path)
    try:
        os.unlink(path)
    except FileNotFoundError:
        return False
    _step("unlinked", path)
    fsync_dir(path.parent)
    return True

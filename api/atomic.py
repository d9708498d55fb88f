"""Durable file writes: temp file in the same folder, flush, fsync, replace, fsync the folder.

A crash at any instant leaves either the old or the new complete file. ``STEP_HOOK`` lets crash tests
observe (and pause at) each step between system calls; it is ``None`` in normal runs.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

from api.safe_read import read_regular_file

# Called as STEP_HOOK(step, path) at each durable step; crash tests set it in a child process.
STEP_HOOK: Callable[[str, Path], None] | None = None


def _step(name: str, path: Path) -> None:
    hook = STEP_HOOK
    if hook is not None:
        hook(name, path)


def temp_path_for(path: Path) -> Path:
    return path.with_name(f"{path.name}.tmp.{os.getpid()}.{threading.get_ident()}")


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
    tmp = temp_path_for(path)
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
        try:
            _step("tmp_created", tmp)
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
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
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    if sync_dir:
        fsync_dir(path.parent)
    return st


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

"""Storage faults for tests: a real small or read-only tmpfs when the machine allows it, else injected errors.

``small_tmpfs(path, size)`` mounts a tmpfs (root only; yields None where mounting is not permitted).
``FaultInjector`` makes chosen calls on files below a folder fail with an errno, the way a full or
read-only disk does (``os.open`` with ``O_CREAT``, ``os.write``, ``os.fsync`` of a file or the folder).
"""

from __future__ import annotations

import contextlib
import errno as errno_mod
import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

from talaria_testing.os_patch import OsPatch


@contextlib.contextmanager
def small_tmpfs(path: Path, size: str = "256k") -> Iterator[Path | None]:
    """Mount a tmpfs of ``size`` at ``path``; yields None (nothing mounted) when that is not permitted."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        yield None
        return
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(path)], capture_output=True
    )
    if done.returncode != 0:
        yield None
        return
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


def remount(path: Path, mode: str) -> None:
    """``mode`` is "ro" or "rw"."""
    subprocess.run(["mount", "-o", f"remount,{mode}", str(path)], check=True, capture_output=True)


def fill(folder: Path, name: str = "filler") -> Path:
    """Write zeros into ``folder/name`` until the file system is full; returns the filler's path."""
    target = Path(folder) / name
    chunk = b"\0" * 4096
    with open(target, "wb", buffering=0) as fh:
        try:
            while True:
                fh.write(chunk)
        except OSError as exc:
            if exc.errno != errno_mod.ENOSPC:
                raise
    with open(target, "ab", buffering=0) as fh:  # the last partial block
        try:
            while True:
                fh.write(b"\0")
        except OSError as exc:
            if exc.errno != errno_mod.ENOSPC:
                raise
    return target


class FaultInjector(OsPatch):
    """Fail file-system calls on paths below ``root`` that ``match`` accepts.

    ``at`` is one of ``"open"`` (creating a file), ``"write"`` (after ``after_bytes`` bytes of that file
    went through), ``"fsync"`` (a file) or ``"fsync_dir"``. ``times`` bounds how many calls fail
    (None = all). Use as a context manager; it patches the ``os`` functions for its duration.
    """

    PATCHED = ("open", "write", "fsync", "close")

    def __init__(
        self,
        root: Path,
        err: int,
        at: str,
        *,
        match: Callable[[str], bool] = lambda name: True,
        after_bytes: int = 0,
        times: int | None = None,
    ):
        self.root = os.path.abspath(root)
        self.err = err
        self.at = at
        self.match = match
        self.after_bytes = after_bytes
        self.times = times
        self.fired = 0
        self._fds: dict[int, list] = {}  # fd -> [name, bytes written, is_dir]
        super().__init__()

    def _inside(self, path) -> str | None:
        if isinstance(path, int):
            return None
        p = os.path.abspath(os.fsdecode(os.fspath(path)))
        if p == self.root or p.startswith(self.root + os.sep):
            return os.path.basename(p)
        return None

    def _fire(self, what: str, name: str) -> None:
        if self.at == what and self.match(name) and (self.times is None or self.fired < self.times):
            self.fired += 1
            raise OSError(self.err, os.strerror(self.err), name)

    def _open(self, path, flags, mode=0o777, *, dir_fd=None):
        name = self._inside(path) if dir_fd is None else None
        if name is not None and flags & os.O_CREAT:
            self._fire("open", name)
        fd = self._real["open"](path, flags, mode, dir_fd=dir_fd)
        if name is not None:
            self._fds[fd] = [name, 0, os.path.isdir(path)]
        return fd

    def _write(self, fd, data):
        entry = self._fds.get(fd)
        if entry is not None and self.at == "write" and self.match(entry[0]):
            room = self.after_bytes - entry[1]
            if room <= 0:
                self._fire("write", entry[0])
            elif len(data) > room:
                data = memoryview(data)[:room]  # a short write: the disk filled up mid-way
        n = self._real["write"](fd, data)
        if entry is not None:
            entry[1] += n
        return n

    def _fsync(self, fd):
        entry = self._fds.get(fd)
        if entry is not None:
            self._fire("fsync_dir" if entry[2] else "fsync", entry[0])
        return self._real["fsync"](fd)

    def _close(self, fd):
        self._fds.pop(fd, None)
        return self._real["close"](fd)

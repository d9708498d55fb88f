"""Reading a file safely: opened once, then judged on that descriptor.

``read_regular_file`` is how every file the server reads for the page or the store is opened: session
files, workspace images, the page's static files, the index and the tombstones. The path is opened once,
never blocking on a FIFO (``O_NONBLOCK``) and never following a link in its last component
(``O_NOFOLLOW``); type and size are then checked with ``fstat`` on the descriptor, and the read stops at
the size limit, so nothing swapped in between a check and the read can be served. A symbolic link is
followed only as the caller says (``links_within``: its target must lie directly in that folder); a
caller that resolved a path itself passes the resolved path and follows none. Each refusal is an
``UnsafeFile`` whose ``problem`` says why (``TooLarge`` for size); a missing file is ``None``; any other
failure is the ``OSError`` itself.

    found = read_regular_file(path, max_bytes=limit)  # (stat, bytes) or None
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

_OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


class UnsafeFile(ValueError):
    """The path holds something that must not be read as this file; ``problem`` says what."""

    def __init__(self, path: Path, problem: str) -> None:
        super().__init__(f"{Path(path).name}: {problem}")
        self.problem = problem


class TooLarge(UnsafeFile):
    """The file is larger than the caller's limit; nothing of it was returned."""


def _in_folder(real: str, folder: Path) -> bool:
    return os.path.dirname(real) == os.path.realpath(folder)


def _open(path: Path, links_within: Path | None) -> int | None:
    """A descriptor of ``path`` (its link's target when the policy allows it); None when absent."""
    try:
        return os.open(path, _OPEN_FLAGS)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ENXIO:  # a socket, or a device without a driver
            raise UnsafeFile(path, "not a regular file") from None
        if exc.errno != errno.ELOOP:
            raise
    if links_within is None:
        raise UnsafeFile(path, "a symbolic link where a session file should be")
    real = os.path.realpath(path)
    if not _in_folder(real, links_within):
        raise UnsafeFile(path, "symlink leading outside the session folder")
    return _open(Path(real), None)  # the target itself must not be a link (it was resolved)


def _opened_under(fd: int, folder: Path) -> bool:
    """Whether the open file lies under ``folder``, by the kernel's name for the descriptor (Linux)."""
    try:
        real = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return True  # no /proc: the caller's resolved path is the check
    return Path(real).is_relative_to(folder)


def _read_at_most(fd: int, count: int) -> bytes:
    chunks: list[bytes] = []
    left = count
    while left > 0:
        chunk = os.read(fd, min(left, 1024 * 1024))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def read_regular_file(
    path: Path,
    *,
    links_within: Path | None = None,
    inside: Path | None = None,
    limit: int | None = None,
    max_bytes: int | None = None,
) -> tuple[os.stat_result, bytes] | None:
    """``(stat, bytes)`` of a regular file, its first ``limit`` bytes when given; None when it is absent.

    ``links_within``: None refuses any symbolic link; a folder follows a link whose target lies directly in
    it. ``inside``: the opened file itself must lie under this (resolved) folder, so a folder on the way
    swapped for a link after the caller resolved the path is refused too. ``max_bytes``: a larger file is
    refused (``TooLarge``), also when it grows while being read. FIFOs, devices, sockets and folders are
    refused.
    """
    fd = _open(Path(path), links_within)
    if fd is None:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UnsafeFile(path, "not a regular file")
        if inside is not None and not _opened_under(fd, inside):
            raise UnsafeFile(path, "outside its folder")
        if max_bytes is not None and st.st_size > max_bytes:
            raise TooLarge(path, f"larger than {max_bytes} bytes")
        if limit is not None:
            return st, _read_at_most(fd, limit)
        if max_bytes is None:
            with os.fdopen(fd, "rb", closefd=False) as fh:
                return st, fh.read()
        data = _read_at_most(fd, max_bytes + 1)  # one byte more: a file that grew since fstat is caught
        if len(data) > max_bytes:
            raise TooLarge(path, f"larger than {max_bytes} bytes")
        return st, data
    finally:
        os.close(fd)

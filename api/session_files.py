"""Reading one session file safely, for the store and for recovery alike.

``read_regular_file`` is the one place a session folder's file is opened for reading. It never blocks on
a FIFO (``O_NONBLOCK``), reads only regular files, and follows a symbolic link only as its caller says:
the store refuses every link (it saves back to the same name, so a link would be written through), and
recovery follows a link whose target stays in the session folder. Each refusal is an ``UnsafeFile``
whose ``problem`` says why; a missing file is ``None``; any other failure is the ``OSError`` itself.

    found = read_regular_file(path)                                  # the store's policy
    found = read_regular_file(path, links_within=folder, max_bytes=n)  # recovery's policy
"""

from __future__ import annotations

import errno
import logging
import os
import stat
from pathlib import Path

from api.jsonio import loads as loads_json

log = logging.getLogger("talaria.models")

METADATA_PREFIX_BYTES = 64 * 1024
_OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


class UnsafeFile(ValueError):
    """The path holds something that must not be read as a session file; ``problem`` says what."""

    def __init__(self, path: Path, problem: str) -> None:
        super().__init__(f"{Path(path).name}: {problem}")
        self.problem = problem


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


def read_regular_file(
    path: Path,
    *,
    links_within: Path | None = None,
    limit: int | None = None,
    max_bytes: int | None = None,
) -> tuple[os.stat_result, bytes] | None:
    """``(stat, bytes)`` of a regular file, its first ``limit`` bytes when given; None when it is absent.

    ``links_within``: None refuses any symbolic link; a folder follows a link whose target lies directly in
    it. ``max_bytes``: a larger file is refused unread. FIFOs, devices, sockets and folders are refused.
    """
    fd = _open(Path(path), links_within)
    if fd is None:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UnsafeFile(path, "not a regular file")
        if max_bytes is not None and st.st_size > max_bytes:
            raise UnsafeFile(path, f"larger than {max_bytes} bytes")
        with os.fdopen(fd, "rb", closefd=False) as fh:
            return st, (fh.read() if limit is None else fh.read(limit))
    finally:
        os.close(fd)


def read_session_file(path: Path, limit: int | None = None) -> tuple[os.stat_result, bytes] | None:
    """The store's read: ``(stat, bytes)`` of a regular session file, None when absent; no link is followed."""
    return read_regular_file(path, limit=limit)


def disk_sig(path: Path) -> tuple | None:
    """What tells one version of a file from another (inode, size, mtime); None when it cannot be seen."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def read_metadata_prefix(path: Path) -> dict | None:
    """Parse only the metadata ahead of ``"messages"`` (the first 64 KiB); None when that is not possible."""
    try:
        found = read_session_file(path, METADATA_PREFIX_BYTES)
    except (OSError, ValueError):
        return None
    if found is None:
        return None
    head = found[1]
    cut = head.find(b'\n  "messages":')
    if cut < 0:
        return None
    prefix = head[:cut].rstrip().rstrip(b",") + b"\n}"
    try:
        data = loads_json(prefix)
    except (ValueError, UnicodeDecodeError):
        return None
    return data if isinstance(data, dict) else None


def bind_to_file_name(data: dict, sid: str) -> None:
    """The file name decides the id: a save must land in the same file the session came from."""
    inner = data.get("session_id")
    if inner != sid:
        if inner:
            log.warning("session file %s.json names itself %r; using the file name", sid, inner)
        data["session_id"] = sid

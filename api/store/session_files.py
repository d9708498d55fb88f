"""Reading one session file safely, for the store and for recovery alike.

A session folder's file is opened through ``safe_read.read_regular_file``: never blocked by a FIFO,
regular files only, and a symbolic link followed only as the caller says: the store refuses every link
(it saves back to the same name, so a link would be written through), and recovery follows a link whose
target stays in the session folder. Each refusal is an ``UnsafeFile`` whose ``problem`` says why; a
missing file is ``None``; any other failure is the ``OSError`` itself.

    found = read_regular_file(path)                                  # the store's policy
    found = read_regular_file(path, links_within=folder, max_bytes=n)  # recovery's policy
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

from api.rules.jsonio import loads as loads_json
from api.store.safe_read import UnsafeFile, read_regular_file  # noqa: F401 - the store's callers import them here

log = logging.getLogger("talaria.models")

METADATA_PREFIX_BYTES = 64 * 1024


def read_session_file(path: Path, limit: int | None = None) -> tuple[os.stat_result, bytes] | None:
    """The store's read: ``(stat, bytes)`` of a regular session file, None when absent; no link is followed."""
    return read_regular_file(path, limit=limit)


def disk_sig(path: Path) -> tuple[Any, ...] | None:
    """What tells one version of a file from another (inode, size, mtime); None when it cannot be seen."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def read_metadata_prefix(path: Path) -> dict[str, Any] | None:
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


def bind_to_file_name(data: dict[str, Any], sid: str) -> None:
    """The file name decides the id: a save must land in the same file the session came from."""
    inner = data.get("session_id")
    if inner != sid:
        if inner:
            log.warning("session file %s.json names itself %r; using the file name", sid, inner)
        data["session_id"] = sid

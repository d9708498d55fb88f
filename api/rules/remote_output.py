"""The files panel's commands on another host, as text in and data out: the frame a command's bytes travel
in, the check of a path from the page, and the NUL-separated records ``find -printf`` answers.

A command's bytes come back base64-encoded between two markers, followed by its exit code, so whatever the
login shell or the agent's command wrapper adds around them (a banner, its working-folder marker, a
warning) is never taken for a file's bytes. Lists are NUL-separated records, the one byte a file name
cannot hold; a name is decoded with ``surrogateescape``, so a name that is not UTF-8 goes back to the host
as the same bytes.
"""

from __future__ import annotations

import base64
import binascii
import re
import shlex
from pathlib import PurePosixPath
from typing import Any

from api.rules.errors import BadRequest, Forbidden

BEGIN = "__TALARIA_OUT__"
END = "__TALARIA_END__"
_FRAME = re.compile(re.escape(BEGIN) + r"([A-Za-z0-9+/=]*)" + re.escape(END) + r"(\d{1,3})")
PATH_MAX_CHARS = 4096
# Fields of one listed entry: name, its type, its target's type, size, mtime, a link's resolved path.
ENTRY_FIELDS = 6
IGNORED_MARK = "/"  # the record between the entries and the names git ignores: never a file name
_TYPES = {"f": "file", "d": "dir"}


def framed(script: str) -> str:
    """``script`` as one command whose standard output comes back framed (its errors are dropped: each
    failure the panel tells apart is an exit code)."""
    return (
        f"printf '%s' {BEGIN}; ( {script}\n) 2>/dev/null | base64 | tr -d '\\n'; "
        f"printf '{END}%s\\n' \"${{PIPESTATUS[0]}}\""
    )


NO_WORKSPACE = 3  # a script's exit code when the session's folder is not there


def in_folder(folder: str, script: str) -> str:
    """``script`` framed, run in ``folder`` (a ``remote_path``); exits ``NO_WORKSPACE`` when it cannot go there."""
    return framed(f"cd -- {folder} || exit {NO_WORKSPACE}\n{script}")


def remote_path(value: Any) -> str:
    """A folder as the shell on the other side reads it: quoted, with a leading ``~`` left to expand."""
    if not isinstance(value, str) or not value.strip():
        raise BadRequest("workspace must be a non-empty folder path")
    value = value.strip()
    if len(value) > PATH_MAX_CHARS or any(c in value for c in "\x00\n\r"):
        raise BadRequest("workspace is not a valid path")
    if value == "~":
        return "~"
    if value.startswith("~/"):
        return "~/" + shlex.quote(value[2:])
    if not value.startswith("/"):
        raise BadRequest("workspace must be an absolute path on that host (or start with ~)")
    return shlex.quote(value)


def unframed(output: str) -> tuple[bytes, int] | None:
    """``(bytes, exit code)`` of a framed command's output (the last frame in it), or None when there is
    none (the command never ran: the connection failed)."""
    frames = list(_FRAME.finditer(output))
    if not frames:
        return None
    found = frames[-1]
    try:
        data = base64.b64decode(found.group(1), validate=True)
    except (binascii.Error, ValueError):
        return None
    return data, int(found.group(2))


def checked_relative(relative: Any, *, allow_root: bool = False) -> str:
    """A path from the page as a path relative to the workspace, refused when it is absolute, starts with
    ``~`` or climbs out with ``..``; ``""`` is the workspace itself, where ``allow_root``."""
    if allow_root and relative in (None, "", ".", "/"):
        return ""
    if not isinstance(relative, str) or not relative.strip():
        raise BadRequest("path must be a non-empty string")
    if len(relative) > PATH_MAX_CHARS or "\x00" in relative:
        raise BadRequest("path is not a valid file path")
    if relative.startswith(("/", "~", "\\")):
        raise Forbidden("path must be relative to the session's workspace")
    if ".." in relative.split("/"):
        raise Forbidden("path is outside the session's workspace")
    return relative


def records(data: bytes) -> list[str]:
    """NUL-terminated records as text (a last unterminated one is kept)."""
    parts = data.split(b"\0")
    if parts and parts[-1] == b"":
        parts.pop()
    return [part.decode("utf-8", "surrogateescape") for part in parts]


def inside(workspace: str, path: str) -> bool:
    """Whether the resolved ``path`` is the resolved ``workspace`` or under it."""
    return PurePosixPath(path).is_relative_to(PurePosixPath(workspace))


def relative_to(workspace: str, path: str) -> str:
    """``path`` relative to ``workspace`` (``""`` for the workspace itself)."""
    found = PurePosixPath(path).relative_to(PurePosixPath(workspace)).as_posix()
    return "" if found == "." else found


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def entry(workspace: str, prefix: str, fields: list[str]) -> dict[str, Any]:
    """One listed entry, shaped as the local listing's row: a link says whether it points inside and is a
    folder only when it points to one inside."""
    name, kind, target_kind, size, mtime, real = fields
    row: dict[str, Any] = {"name": name, "path": prefix + name}
    if kind == "l":
        points_inside = bool(real) and inside(workspace, real)
        row["link"] = "inside" if points_inside else "outside"
        row["type"] = "dir" if points_inside and target_kind == "d" else "link"
        return row
    row["type"] = _TYPES.get(kind, "special")  # FIFO, socket, device: shown, never opened
    when = _number(mtime)
    if row["type"] == "file":
        row["size"] = int(_number(size) or 0)
    if row["type"] != "special" and when is not None:
        row["mtime"] = when
    return row


def listing(workspace: str, prefix: str, fields: list[str]) -> tuple[list[dict[str, Any]], set[str]]:
    """The entries of a listing's records and the names git ignores (after ``IGNORED_MARK``); an entry cut
    short at the end is dropped."""
    rows: list[dict[str, Any]] = []
    at = 0
    while at + ENTRY_FIELDS <= len(fields) and fields[at] != IGNORED_MARK:
        rows.append(entry(workspace, prefix, fields[at : at + ENTRY_FIELDS]))
        at += ENTRY_FIELDS
    ignored: set[str] = set()
    if IGNORED_MARK in fields[at : at + 1]:
        ignored = {name.rstrip("/") for name in fields[at + 1 :] if name}
    return rows, ignored

"""Files of a session's workspace, for the page: the path rule and image type checks.

A path from the page (``data-media`` of a rendered image, an attachment) is relative to the session's
workspace. It is resolved with symlinks followed and must stay inside the resolved workspace, so
``..``, absolute paths and links that point out are refused before any file is opened. The resolved file
is then opened once, through ``safe_read`` (no link, no FIFO, under the workspace, at most the size
limit), so nothing swapped in after the check is served. Only images
whose bytes say they are PNG, JPEG, GIF or WebP are served (never SVG, which can carry script), under
a size limit, with ``nosniff`` and a sandboxing CSP.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from api.rules.errors import BadRequest, Conflict, Forbidden, NotFound, PayloadTooLarge, UnsupportedMediaType
from api.services import workspace
from api.store import config, models, safe_read, session_lookup

PATH_MAX_CHARS = 4096
NAME_MAX = 255  # characters of a file or folder name

# Leading bytes → content type (WebP is RIFF....WEBP).
_SIGNATURES: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)


def image_type(head: bytes) -> str | None:
    """The content type of image bytes by their signature, or None when they are not a served image."""
    for signature, content_type in _SIGNATURES:
        if head.startswith(signature):
            return content_type
    if len(head) >= 12 and head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    return None


def session_workspace(sid: str, *, store: models.Store | None = None) -> Path:
    """The session's workspace folder, resolved (the default workspace when the session names none).

    Every local read or write of a session's files (files panel, changes view, attachments, images, git)
    comes through here, so a session in another execution environment gets a clear refusal instead of
    files of this machine that merely share the folder's name (its files panel, each turn's changes,
    attachments, images and git view go to its host first, through ``environment_shell``)."""
    session = session_lookup.load_session(sid, store=store)
    remote = getattr(session, "environment", None)
    if remote:
        raise Conflict(
            f"This session works in the environment {remote!r}: its files are on that host, not on this "
            "machine; switch the session to 'local' to work on this machine's folders.",
            environment=remote,
        )
    folder = getattr(session, "workspace", None) or workspace.default()
    return Path(folder).expanduser().resolve()


def clean_name(name: Any) -> str:
    """A file or folder name from the page: 1 to 255 characters, no ``/``, not ``.`` or ``..``."""
    if not isinstance(name, str) or not name.strip() or len(name) > NAME_MAX:
        raise BadRequest("A name must be 1 to 255 characters")
    if "/" in name or "\\" in name or name in (".", "..") or "\x00" in name:
        raise BadRequest("A name cannot contain / or be . or ..")
    return name


def resolve_in_workspace(workspace: Path, relative: Any) -> Path:
    """``workspace / relative`` resolved; refuses anything that is not a plain path inside it."""
    if not isinstance(relative, str) or not relative.strip():
        raise BadRequest("path must be a non-empty string")
    if len(relative) > PATH_MAX_CHARS or "\x00" in relative:
        raise BadRequest("path is not a valid file path")
    if Path(relative).is_absolute() or relative.startswith(("~", "\\")):
        raise Forbidden("path must be relative to the session's workspace")
    try:
        target = (workspace / relative).resolve()
    except (OSError, RuntimeError, ValueError):
        raise BadRequest("path is not a valid file path") from None
    if not target.is_relative_to(workspace):
        raise Forbidden("path is outside the session's workspace")
    return target


def read_media(sid: str, relative: Any, *, store: models.Store | None = None) -> tuple[bytes, str]:
    """``(bytes, content type)`` of an image in the session's workspace."""
    folder = session_workspace(sid, store=store)
    target = resolve_in_workspace(folder, relative)
    limit = int(config.setting("attachment_max_bytes"))
    try:
        found = safe_read.read_regular_file(target, inside=folder, max_bytes=limit)
    except safe_read.TooLarge:
        raise PayloadTooLarge(f"the image is larger than {limit // (1024 * 1024)} MB") from None
    except safe_read.UnsafeFile:
        raise NotFound("No such file in the workspace") from None
    except (IsADirectoryError, NotADirectoryError):
        raise NotFound("No such file in the workspace") from None
    except PermissionError:
        raise Forbidden("The file cannot be read") from None
    if found is None:
        raise NotFound("No such file in the workspace")
    data = found[1]
    content_type = image_type(data[:16])
    if content_type is None:
        raise UnsupportedMediaType("only PNG, JPEG, GIF and WebP images are shown")
    return data, content_type

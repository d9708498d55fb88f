"""Attachments: files the person adds to a message, stored in the session's workspace.

A file arrives as ``{session_id, name, data}`` (``data`` base64) and is written durably to
``<workspace>/uploads/<safe name>``: the name loses any folder part, control and unusual characters,
leading dots and excess length; an existing file is never overwritten (``name-1.ext``, …). Only known
kinds are taken: images whose bytes are PNG, JPEG, GIF or WebP, PDFs that start like one, and text
files (by extension) that are UTF-8. Size is bounded by ``attachment_max_bytes``. The ``uploads``
folder is opened once without following a link and written through that descriptor, so a link there,
even one swapped in meanwhile, cannot carry a write elsewhere; the name is claimed without replacing
anything another process created (``atomic.write_new_durable``). The first upload into a folder sweeps
the temp files killed uploads left there.

A message names its attachments by their workspace paths; the agent is told each path (images are
also shown in the transcript through the media route).
"""

from __future__ import annotations

import base64
import binascii
import errno
import itertools
import os
import re
import unicodedata
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from api.rules.errors import BadRequest, Forbidden, PayloadTooLarge, UnsupportedMediaType
from api.services import media
from api.store import atomic, config, models

UPLOADS = "uploads"
NAME_MAX_CHARS = 100
ATTACHMENTS_PER_MESSAGE = 10
TEXT_EXTENSIONS = frozenset(
    {
        ".txt", ".md", ".markdown", ".csv", ".tsv", ".json", ".jsonl", ".yaml", ".yml", ".toml", ".ini",
        ".xml", ".html", ".css", ".log", ".py", ".js", ".mjs", ".ts", ".tsx", ".jsx", ".sh", ".sql",
        ".c", ".h", ".cpp", ".hpp", ".java", ".go", ".rs", ".rb", ".php", ".swift", ".kt", ".r", ".tex",
    }
)  # fmt: skip
IMAGE_EXTENSIONS = frozenset({".png", ".jpg", ".jpeg", ".gif", ".webp"})
_UNSAFE = re.compile(r"[^A-Za-z0-9._ -]+")
_FOLDER_ATTEMPTS = 3


def safe_name(name: Any) -> str:
    """A plain file name made from what the browser sent: no folders, no hidden files, short, tame."""
    if not isinstance(name, str):
        raise BadRequest("name must be a string")
    base = re.split(r"[\\/]", unicodedata.normalize("NFKC", name))[-1]
    base = _UNSAFE.sub("_", "".join(ch for ch in base if ch.isprintable()))
    base = re.sub(r"_+", "_", base).strip(" .")
    stem, dot, ext = base.rpartition(".")
    if not dot:
        stem, ext = base, ""
    ext = ext[:10]
    stem = stem[: NAME_MAX_CHARS - len(ext) - 1].strip(" ._") or "attachment"
    return f"{stem}.{ext}" if ext else stem


def classify(name: str, data: bytes) -> tuple[str, str]:
    """``(kind, content type)``: ``image`` by its signature, ``file`` for a PDF or UTF-8 text."""
    ext = Path(name).suffix.lower()
    if ext in IMAGE_EXTENSIONS:
        content_type = media.image_type(data[:16])
        if content_type is None:
            raise UnsupportedMediaType(f"{name} is not a PNG, JPEG, GIF or WebP image")
        return "image", content_type
    if ext == ".pdf":
        if not data.startswith(b"%PDF-"):
            raise UnsupportedMediaType(f"{name} is not a PDF")
        return "file", "application/pdf"
    if ext in TEXT_EXTENSIONS:
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            raise UnsupportedMediaType(f"{name} is not UTF-8 text") from None
        return "file", "text/plain"
    raise UnsupportedMediaType(
        "only images (PNG, JPEG, GIF, WebP), PDFs and text files can be attached"
        + (f"; not {ext} files" if ext else "")
    )


def decode(data: Any, limit: int, *, allow_empty: bool = False) -> bytes:
    """The bytes of a base64 upload, at most ``limit`` (413), empty only where ``allow_empty``."""
    if not isinstance(data, str):
        raise BadRequest("data must be a base64 string")
    if len(data) > (limit + 2) * 4 // 3 + 4:
        raise PayloadTooLarge(f"the file is larger than {limit // (1024 * 1024)} MB")
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise BadRequest("data is not valid base64") from None
    if not raw and not allow_empty:
        raise BadRequest("the file is empty")
    if len(raw) > limit:
        raise PayloadTooLarge(f"the file is larger than {limit // (1024 * 1024)} MB")
    return raw


def _uploads_folder(workspace: Path) -> int:
    """A descriptor of ``<workspace>/uploads`` (made when missing); a link or file there is refused."""
    try:
        return atomic.open_folder(workspace, UPLOADS)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise Forbidden("the workspace's uploads folder is not a plain folder") from None
        if exc.errno == errno.ENOENT:  # something keeps moving it away while we open it
            raise Forbidden("the workspace's uploads folder keeps changing; nothing was stored") from None
        raise


def candidate_names(name: str) -> Iterator[str]:
    """``name``, then ``stem-1.ext``, ``stem-2.ext``, … (pure)."""
    yield name
    stem, ext = Path(name).stem, Path(name).suffix
    for n in itertools.count(1):
        yield f"{stem}-{n}{ext}"


def _write_into_uploads(workspace: Path, name: str, raw: bytes, swept: atomic.Swept) -> str:
    """The name ``raw`` was stored under in the uploads folder. A folder removed while it is written
    (another process renaming a folder over it) takes no file, so the write is tried again in the
    folder that name holds now, a few times, and then refused."""
    for _ in range(_FOLDER_ATTEMPTS):
        folder_fd = _uploads_folder(workspace)
        try:
            atomic.sweep_once(workspace / UPLOADS, folder_fd, swept)
            return atomic.write_new_durable(folder_fd, candidate_names(name), raw)
        except FileNotFoundError:
            continue
        finally:
            os.close(folder_fd)
    raise Forbidden("the workspace's uploads folder keeps changing; nothing was stored")


def store_attachment(
    session_id: str, name: Any, data: Any, *, store: models.Store | None = None
) -> dict[str, Any]:
    """Write one attachment into the session's workspace; answers its path (relative), kind, size."""
    workspace = media.session_workspace(session_id, store=store)
    limit = int(config.setting("attachment_max_bytes"))
    clean = safe_name(name)
    raw = decode(data, limit)
    kind, content_type = classify(clean, raw)
    target = workspace / UPLOADS / _write_into_uploads(workspace, clean, raw, models.store(store).swept)
    relative = target.relative_to(workspace).as_posix()
    return {
        "path": relative,
        "name": target.name,
        "kind": kind,
        "content_type": content_type,
        "size": len(raw),
    }


def message_attachments(
    session_id: str, paths: Any, *, store: models.Store | None = None
) -> list[dict[str, Any]]:
    """The attachments a message names, checked: each a file inside the session's workspace."""
    if paths is None:
        return []
    if not isinstance(paths, list) or len(paths) > ATTACHMENTS_PER_MESSAGE:
        raise BadRequest(f"attachments must be a list of at most {ATTACHMENTS_PER_MESSAGE} paths")
    workspace = media.session_workspace(session_id, store=store)
    out = []
    for path in paths:
        target = media.resolve_in_workspace(workspace, path)
        if not target.is_file():
            raise BadRequest(f"attachment {path!r} is not a file in the workspace")
        kind = "image" if target.suffix.lower() in IMAGE_EXTENSIONS else "file"
        out.append({"path": target.relative_to(workspace).as_posix(), "name": target.name, "kind": kind})
    return out


def agent_text(text: str, attached: list[dict[str, Any]]) -> str:
    """The message as the agent reads it: the text, then one line naming each attachment's path."""
    if not attached:
        return text
    lines = [
        f"[Attached {'image' if item['kind'] == 'image' else 'file'}: {item['path']} (in the workspace)]"
        for item in attached
    ]
    return text + "\n\n" + "\n".join(lines)


def image_files(
    session_id: str, attached: list[dict[str, Any]], *, store: models.Store | None = None
) -> list[str]:
    """Absolute paths of the attached images (checked again: inside the session's workspace)."""
    images = [item["path"] for item in attached if item.get("kind") == "image"]
    if not images:
        return []
    workspace = media.session_workspace(session_id, store=store)
    return [str(media.resolve_in_workspace(workspace, path)) for path in images]

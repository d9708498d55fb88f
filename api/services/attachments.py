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
also shown in the transcript through the media route). A session in another execution environment keeps its
attachments in the ``uploads`` folder of its workspace on that host, under the same name rule
(``remote_writes``); its attached images are copied here for the turn, for a model that can see them.
"""

from __future__ import annotations

import base64
import binascii
import errno
import itertools
import os
import re
import shutil
import tempfile
import unicodedata
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import Any

from api.rules.errors import BadRequest, Forbidden, PayloadTooLarge, UnsupportedMediaType
from api.services import environment_shell, environment_workers, media, remote_files, remote_writes
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
REMOTE_NAME_TRIES = 100  # free names tried on another host (name, name-1, …) in one command


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
    session_id: str,
    name: Any,
    data: Any,
    *,
    store: models.Store | None = None,
    environment_pools: environment_workers.EnvironmentPools | None = None,
) -> dict[str, Any]:
    """Write one attachment into the session's workspace (a remote session's on its host); answers its path
    (relative), kind, size."""
    remote = environment_shell.where(session_id, store=store, environment_pools=environment_pools)
    limit = int(config.setting("attachment_max_bytes"))
    clean = safe_name(name)
    raw = decode(data, limit)
    kind, content_type = classify(clean, raw)
    if remote is not None:
        names = list(itertools.islice(candidate_names(clean), REMOTE_NAME_TRIES))
        relative, stored = remote_writes.write_new(remote, UPLOADS, names, raw, make_folder=True)
    else:
        workspace = media.session_workspace(session_id, store=store)
        target = workspace / UPLOADS / _write_into_uploads(workspace, clean, raw, models.store(store).swept)
        relative, stored = target.relative_to(workspace).as_posix(), target.name
    return {
        "path": relative,
        "name": stored,
        "kind": kind,
        "content_type": content_type,
        "size": len(raw),
    }


def message_attachments(
    session_id: str,
    paths: Any,
    *,
    store: models.Store | None = None,
    environment_pools: environment_workers.EnvironmentPools | None = None,
) -> list[dict[str, Any]]:
    """The attachments a message names, checked: each a file inside the session's workspace (a remote
    session's, on its host)."""
    if paths is None:
        return []
    if not isinstance(paths, list) or len(paths) > ATTACHMENTS_PER_MESSAGE:
        raise BadRequest(f"attachments must be a list of at most {ATTACHMENTS_PER_MESSAGE} paths")
    remote = environment_shell.where(session_id, store=store, environment_pools=environment_pools)
    if remote is not None:
        found = [PurePosixPath(path) for path in remote_writes.files(remote, paths)]
    else:
        workspace = media.session_workspace(session_id, store=store)
        found = []
        for path in paths:
            target = media.resolve_in_workspace(workspace, path)
            if not target.is_file():
                raise BadRequest(f"attachment {path!r} is not a file in the workspace")
            found.append(PurePosixPath(target.relative_to(workspace).as_posix()))
    return [{"path": path.as_posix(), "name": path.name, "kind": _kind(path.suffix)} for path in found]


def _kind(suffix: str) -> str:
    return "image" if suffix.lower() in IMAGE_EXTENSIONS else "file"


def agent_text(text: str, attached: list[dict[str, Any]]) -> str:
    """The message as the agent reads it: the text, then one line naming each attachment's path."""
    if not attached:
        return text
    lines = [
        f"[Attached {'image' if item['kind'] == 'image' else 'file'}: {item['path']} (in the workspace)]"
        for item in attached
    ]
    return text + "\n\n" + "\n".join(lines)


def persons_text(text: str, attached: Any) -> str:
    """The message as the person wrote it: ``agent_text`` without the lines naming its attachments."""
    if not isinstance(attached, list) or not all(
        isinstance(item, dict) and "path" in item for item in attached
    ):
        return text
    named = agent_text("", [{"kind": item.get("kind"), "path": item["path"]} for item in attached])
    return text[: -len(named)] if named and text.endswith(named) else text


def image_files(
    session_id: str,
    attached: list[dict[str, Any]],
    *,
    store: models.Store | None = None,
    environment_pools: environment_workers.EnvironmentPools | None = None,
) -> tuple[list[str], str | None]:
    """Absolute paths of the attached images on this machine (checked again: inside the session's workspace),
    and the folder of copies made of a remote session's images (read on its host), which the turn removes."""
    images = [item["path"] for item in attached if item.get("kind") == "image"]
    if not images:
        return [], None
    remote = environment_shell.where(session_id, store=store, environment_pools=environment_pools)
    if remote is None:
        workspace = media.session_workspace(session_id, store=store)
        return [str(media.resolve_in_workspace(workspace, path)) for path in images], None
    limit = int(config.setting("attachment_max_bytes"))
    folder = tempfile.mkdtemp(prefix="talaria-images-")
    try:
        copies = []
        for number, path in enumerate(images):
            data, _content_type = remote_files.read_image(remote, path, limit)
            copy = Path(folder) / f"{number}-{PurePosixPath(path).name}"
            copy.write_bytes(data)
            copies.append(str(copy))
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return copies, folder

"""A file as the files panel shows it, whichever host it was read on: whether it hides behind the hidden
toggle, its kind by its first bytes and name, its text with Pygments highlighting, Markdown rendered, a
table's first rows, and the content type it is downloaded with."""

from __future__ import annotations

import csv
import io
from pathlib import PurePosixPath
from typing import Any

from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import get_lexer_for_filename
from pygments.util import ClassNotFound

from api.agent import agent_memory
from api.services import media, render

PREVIEW_MAX = 1024 * 1024  # bytes of a file shown in the panel
CSV_ROWS = 500
HIGHLIGHT_MAX = 200_000
_FORMATTER = HtmlFormatter(nowrap=True)
_HIDDEN_DIRS = {
    ".git",
    "node_modules",
    "__pycache__",
    ".venv",
    "venv",
    ".mypy_cache",
    ".pytest_cache",
    ".tox",
}


def is_hidden(name: str) -> bool:
    """Shown only with the hidden toggle: dotfiles and the folders of tools and dependencies."""
    return name.startswith(".") or name in _HIDDEN_DIRS


def kind(name: str, head: bytes) -> str:
    if media.image_type(head):
        return "image"
    if head.startswith(b"%PDF-"):
        return "pdf"
    if b"\x00" in head[:8192]:
        return "binary"
    suffix = PurePosixPath(name).suffix.lower()
    if suffix in (".md", ".markdown"):
        return "markdown"
    if suffix in (".csv", ".tsv"):
        return "csv"
    return "text"


def _highlighted(name: str, text: str) -> str | None:
    if len(text) > HIGHLIGHT_MAX:
        return None
    try:
        lexer = get_lexer_for_filename(name, stripnl=False, ensurenl=False)
    except ClassNotFound:
        return None
    return str(highlight(text, lexer, _FORMATTER))


def _csv_rows(name: str, text: str) -> list[list[str]]:
    dialect = "excel-tab" if PurePosixPath(name).suffix.lower() == ".tsv" else "excel"
    rows = []
    for row in csv.reader(io.StringIO(text), dialect=dialect):
        rows.append([cell[:500] for cell in row[:50]])
        if len(rows) >= CSV_ROWS:
            break
    return rows


def preview(path: str, name: str, size: int, mtime: float, data: bytes) -> dict[str, Any]:
    """The panel's row for a file read up to ``PREVIEW_MAX + 1`` bytes: its kind and what to show (text,
    highlighted code, Markdown, a table), or only its facts for an image, a PDF (shown from the raw route),
    a binary or a file too large to show."""
    row: dict[str, Any] = {
        "path": path,
        "name": name,
        "size": size,
        "mtime": mtime,
        "kind": kind(name, data[:8192]),
    }
    if row["kind"] in ("image", "pdf", "binary"):
        return row
    if size > PREVIEW_MAX or len(data) > PREVIEW_MAX:
        return {**row, "kind": "too_large", "limit": PREVIEW_MAX}
    text = data.decode("utf-8", errors="replace")
    row.update(content=text, version=agent_memory.version_of(data), editable=True)
    if row["kind"] == "markdown":
        row["html"] = render.render_markdown(text)
    elif row["kind"] == "csv":
        row["rows"] = _csv_rows(name, text)
    else:
        row["highlighted"] = _highlighted(name, text)
    return row


def content_type(name: str, data: bytes) -> str:
    """What a file's raw bytes are served as: an image or a PDF as itself, text as plain text (HTML and SVG
    too: never rendered in the page's origin), anything else as bytes."""
    found = kind(name, data[:8192])
    if found == "image":
        return media.image_type(data[:16]) or "application/octet-stream"
    if found == "pdf":
        return "application/pdf"
    if found == "binary":
        return "application/octet-stream"
    return "text/plain; charset=utf-8"

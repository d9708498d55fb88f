"""The sidebar list: the fields the sidebar shows, newest first, in pages, pinned rows always on the first.

A row of ``_index.json`` carries some fifty fields (compression state, drafts, token counts...); the list
sends only the fields the table (``api.rules.session_fields``) marks for the sidebar, the ones the page and hermes-webui's session list read. Pages are cut by an
opaque cursor (the ``updated_at`` and id of the last row sent), so a page is stable while sessions
change; the page follows changes through ``api.services.session_feed`` rather than fetching the list again.
"""

from __future__ import annotations

import base64
import math
from typing import Any, cast

from api.rules import jsonio
from api.rules.errors import BadRequest
from api.rules.session_fields import SIDEBAR_FIELDS, SIDEBAR_IF_SET
from api.rules.sidebar_order import Entry, order_key
from api.store import models

MAX_LIMIT = 500


def sidebar_row(row: dict[str, Any]) -> dict[str, Any]:
    """The fields of an index row that the sidebar shows."""
    out = {name: row.get(name) for name in SIDEBAR_FIELDS}
    for name in SIDEBAR_IF_SET:
        if row.get(name):
            out[name] = row[name]
    return out


def encode_cursor(row: dict[str, Any]) -> str:
    updated, sid = order_key(row)
    return base64.urlsafe_b64encode(f"{updated!r}|{sid}".encode()).decode("ascii").rstrip("=")


def decode_cursor(cursor: str) -> tuple[float, str]:
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode("utf-8")
        updated, sid = text.split("|", 1)
        key = float(updated), sid
    except (ValueError, UnicodeDecodeError):
        raise BadRequest("Invalid cursor") from None
    if math.isnan(key[0]):  # no row has that place in the order
        raise BadRequest("Invalid cursor")
    return key


def _row_json(entry: Entry) -> bytes:
    """A row's sidebar JSON, serialized once per version of the row (a changed row is a new entry)."""
    data = entry.derived
    if data is None:
        data = entry.derived = jsonio.dumps_kept(sidebar_row(entry.row))
    return cast("bytes", data)


def page(
    limit: int | None, cursor: str | None, project: str | None = None, *, store: models.Store | None = None
) -> tuple[list[bytes], str | None, int]:
    """``(rows as JSON, next cursor or None, total rows)``. The first page (no cursor) starts with every
    pinned row, then ``limit`` others; later pages hold only unpinned rows. No limit: everything. With
    ``project``, that project's rows only. O(page size + log sessions): the index keeps the order (and
    each project's) as rows change."""
    if limit is not None and not 1 <= limit <= MAX_LIMIT:
        raise BadRequest(f"limit must be between 1 and {MAX_LIMIT}")
    before = None if cursor is None else decode_cursor(cursor)
    found = models.store(store).page(before, limit, project)
    rows = [_row_json(entry) for entry in found.pinned + found.rows]
    next_cursor = None
    if found.next_key is not None:
        updated, sid = found.next_key
        next_cursor = encode_cursor({"updated_at": updated, "session_id": sid})
    return rows, next_cursor, found.total


def page_json(
    limit: int | None,
    cursor: str | None,
    extra: dict[str, Any],
    project: str | None = None,
    *,
    store: models.Store | None = None,
) -> list[bytes]:
    """``{"sessions": [...], "next_cursor", "total", **extra}`` as chunks to send in order."""
    rows, next_cursor, total = page(limit, cursor, project, store=store)
    tail = jsonio.dumps({"next_cursor": next_cursor, "total": total, **extra})
    return [b'{"sessions":[', b",".join(rows), b"],", tail[1:]]

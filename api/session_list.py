"""The sidebar list: the fields the sidebar shows, newest first, in pages, pinned rows always on the first.

A row of ``_index.json`` carries some fifty fields (compression state, drafts, token counts...); the list
sends only ``SIDEBAR_FIELDS``, the ones the page and hermes-webui's session list read. Pages are cut by an
opaque cursor (the ``updated_at`` and id of the last row sent), so a page is stable while sessions
change; the page follows changes through ``api.session_feed`` rather than fetching the list again.
"""

from __future__ import annotations

import base64
import operator
import threading
from dataclasses import dataclass
from typing import Any

from api import jsonio, models
from api.errors import BadRequest

SIDEBAR_FIELDS: tuple[str, ...] = (
    "session_id", "title", "model", "model_provider", "workspace", "message_count", "created_at", "updated_at",
    "last_message_at", "pinned", "archived", "project_id", "profile", "is_streaming",
)  # fmt: skip
OPTIONAL_FIELDS: tuple[str, ...] = ("parent_session_id",)  # sent only when set
MAX_LIMIT = 500


def sidebar_row(row: dict) -> dict:
    """The fields of an index row that the sidebar shows."""
    out = {name: row.get(name) for name in SIDEBAR_FIELDS}
    for name in OPTIONAL_FIELDS:
        if row.get(name):
            out[name] = row[name]
    return out


def _number(value: Any) -> float:
    try:
        return float(value or 0)
    except (TypeError, ValueError, OverflowError):
        return 0.0


def order_key(row: dict) -> tuple[float, str]:
    """Newest first by ``updated_at``; the id breaks ties so the order (and a cursor) is total."""
    return _number(row.get("updated_at")), str(row.get("session_id") or "")


def encode_cursor(row: dict) -> str:
    updated, sid = order_key(row)
    return base64.urlsafe_b64encode(f"{updated!r}|{sid}".encode()).decode("ascii").rstrip("=")


def decode_cursor(cursor: str) -> tuple[float, str]:
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode("utf-8")
        updated, sid = text.split("|", 1)
        return float(updated), sid
    except (ValueError, UnicodeDecodeError):
        raise BadRequest("Invalid cursor") from None


@dataclass(frozen=True)
class _Snapshot:
    """The index rows (by identity), sorted, each with its sidebar JSON."""

    source: list[dict]
    pinned: list[bytes]
    others: list[tuple[tuple[float, str], bytes]]  # (order key, JSON), newest first
    by_content: dict[tuple, bytes]  # sidebar fields → their JSON, reused by the next snapshot


_SNAPSHOT: dict[str, _Snapshot | None] = {"snapshot": None}
# One rebuild at a time: while turns stream, saves change the index often, and fifty requests arriving
# together must not all sort and serialize the same rows.
_SNAPSHOT_LOCK = threading.Lock()
_FIELDS = SIDEBAR_FIELDS + OPTIONAL_FIELDS


def _row_json(row: dict, previous: dict[tuple, bytes], current: dict[tuple, bytes]) -> bytes:
    """A row's sidebar JSON, serialized again only when one of its sidebar fields changed."""
    try:
        key = tuple(row.get(name) for name in _FIELDS)
        hash(key)
    except TypeError:  # an odd value (a dict as profile...): no reuse for this row
        return jsonio.dumps(sidebar_row(row))
    data = previous.get(key)
    if data is None:
        data = jsonio.dumps(sidebar_row(row))
    current[key] = data
    return data


def _still_current(rows: list[dict]) -> _Snapshot | None:
    """The cached snapshot when the index still hands out exactly these row objects."""
    cached = _SNAPSHOT["snapshot"]
    if cached is not None and len(cached.source) == len(rows) and all(map(operator.is_, cached.source, rows)):
        return cached
    return None


def _snapshot() -> _Snapshot:
    """Sorted, serialized rows; rebuilt only when the index hands out different row objects."""
    current_snapshot = _still_current(models.all_sessions())
    if current_snapshot is not None:
        return current_snapshot
    with _SNAPSHOT_LOCK:
        rows = models.all_sessions()
        current_snapshot = _still_current(rows)
        if current_snapshot is not None:
            return current_snapshot  # another request rebuilt it meanwhile
        cached = _SNAPSHOT["snapshot"]
        previous = cached.by_content if cached is not None else {}
        current: dict[tuple, bytes] = {}
        ordered = sorted(rows, key=order_key, reverse=True)
        pinned = [_row_json(r, previous, current) for r in ordered if r.get("pinned")]
        others = [(order_key(r), _row_json(r, previous, current)) for r in ordered if not r.get("pinned")]
        snapshot = _Snapshot(rows, pinned, others, current)
        _SNAPSHOT["snapshot"] = snapshot  # holding ``rows`` keeps their ids from being reused
        return snapshot


def _after(others: list[tuple[tuple[float, str], bytes]], cursor: tuple[float, str]) -> int:
    """Index of the first row older than ``cursor`` (binary search on the newest-first order)."""
    low, high = 0, len(others)
    while low < high:
        middle = (low + high) // 2
        if others[middle][0] >= cursor:
            low = middle + 1
        else:
            high = middle
    return low


def page(limit: int | None, cursor: str | None) -> tuple[list[bytes], str | None, int]:
    """``(rows as JSON, next cursor or None, total rows)``. The first page (no cursor) starts with every
    pinned row, then ``limit`` others; later pages hold only unpinned rows. No limit: everything."""
    if limit is not None and not 1 <= limit <= MAX_LIMIT:
        raise BadRequest(f"limit must be between 1 and {MAX_LIMIT}")
    snapshot = _snapshot()
    start = 0 if cursor is None else _after(snapshot.others, decode_cursor(cursor))
    end = len(snapshot.others) if limit is None else min(len(snapshot.others), start + limit)
    chunk = [data for _, data in snapshot.others[start:end]]
    rows = (snapshot.pinned + chunk) if cursor is None else chunk
    next_cursor = None
    if end < len(snapshot.others) and end > 0:
        updated, sid = snapshot.others[end - 1][0]
        next_cursor = encode_cursor({"updated_at": updated, "session_id": sid})
    return rows, next_cursor, len(snapshot.source)


def page_json(limit: int | None, cursor: str | None, extra: dict[str, Any]) -> list[bytes]:
    """``{"sessions": [...], "next_cursor", "total", **extra}`` as chunks to send in order."""
    rows, next_cursor, total = page(limit, cursor)
    tail = jsonio.dumps({"next_cursor": next_cursor, "total": total, **extra})
    return [b'{"sessions":[', b",".join(rows), b"],", tail[1:]]

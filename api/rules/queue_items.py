"""The queue of a session: messages sent while a turn ran, kept in the session file (``queued_messages``)
and run one by one, in order, after it (pure: lists in, lists out).

An item is ``{"id", "text", "created_at"}`` plus ``"attachments"`` (as ``/api/chat/start`` takes them),
``"source"`` (``"steer"`` for a steer the running turn could not take, ``"interrupt"`` for the message an
interrupt sends) and ``"error"`` (why it could not start; it waits until edited, cancelled or sent again).
"""

from __future__ import annotations

import uuid
from typing import Any

from api.rules.errors import BadRequest, NotFound

MAX_ITEMS = 50  # a queue longer than this is a runaway client, not a person
SOURCES = frozenset({"steer", "interrupt"})


def _valid(item: Any) -> bool:
    return (
        isinstance(item, dict)
        and isinstance(item.get("id"), str)
        and bool(item["id"])
        and isinstance(item.get("text"), str)
    )


def valid_items(raw: Any) -> list[dict[str, Any]]:
    """The items of a file's ``queued_messages`` a queue can run; anything else is dropped."""
    return [dict(item) for item in raw if _valid(item)] if isinstance(raw, list) else []


def new_item(
    text: str, created_at: float, attachments: list[str] | None = None, source: str | None = None
) -> dict[str, Any]:
    item: dict[str, Any] = {"id": uuid.uuid4().hex[:12], "text": text, "created_at": created_at}
    if attachments:
        item["attachments"] = list(attachments)
    if source in SOURCES:
        item["source"] = source
    return item


def added(items: list[dict[str, Any]], item: dict[str, Any], first: bool = False) -> list[dict[str, Any]]:
    """``items`` with ``item`` at the end (or at the head: an interrupt's message runs next)."""
    if len(items) >= MAX_ITEMS:
        raise BadRequest(f"At most {MAX_ITEMS} messages can wait in a queue")
    return [item, *items] if first else [*items, item]


def index_of(items: list[dict[str, Any]], item_id: Any) -> int:
    for index, item in enumerate(items):
        if item.get("id") == item_id:
            return index
    raise NotFound("No such queued message (it may have started already)")


def edited(items: list[dict[str, Any]], item_id: Any, text: str) -> list[dict[str, Any]]:
    """The item's text replaced; a refusal it carried is forgotten (the person changed it)."""
    index = index_of(items, item_id)
    item = {k: v for k, v in items[index].items() if k != "error"}
    item["text"] = text
    return [*items[:index], item, *items[index + 1 :]]


def without(items: list[dict[str, Any]], item_id: Any) -> list[dict[str, Any]]:
    index = index_of(items, item_id)
    return [*items[:index], *items[index + 1 :]]


def with_error(items: list[dict[str, Any]], item_id: Any, error: str) -> list[dict[str, Any]]:
    index = index_of(items, item_id)
    return [*items[:index], {**items[index], "error": error}, *items[index + 1 :]]

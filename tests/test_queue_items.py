"""A session's queue as data: what a file's ``queued_messages`` may hold, and each change to it."""

from __future__ import annotations

import pytest

from api.rules import queue_items
from api.rules.errors import BadRequest, NotFound


def test_items_another_program_mangled_are_dropped_and_the_rest_kept_in_order():
    good = {"id": "a1", "text": "first", "created_at": 1.0, "extra": "kept"}
    raw = [good, {"id": "", "text": "x"}, {"text": "no id"}, "text", None, {"id": "b2", "text": ""}]
    assert queue_items.valid_items(raw) == [good, {"id": "b2", "text": ""}]
    assert queue_items.valid_items({"id": "a1"}) == []
    assert queue_items.valid_items(None) == []


def test_an_interrupt_goes_to_the_head_and_a_queued_message_to_the_end():
    first = queue_items.new_item("one", 1.0)
    second = queue_items.new_item("two", 2.0, ["notes.txt"], "interrupt")
    assert first.keys() == {"id", "text", "created_at"} and first["id"] != second["id"]
    assert second["attachments"] == ["notes.txt"] and second["source"] == "interrupt"
    assert queue_items.new_item("x", 1.0, source="other").get("source") is None
    assert queue_items.added([first], second, first=True) == [second, first]
    assert queue_items.added([first], second) == [first, second]


def test_editing_replaces_the_text_and_forgets_why_it_could_not_start():
    item = queue_items.new_item("old", 1.0)
    refused = queue_items.with_error([item], item["id"], "workspace gone")
    assert refused[0]["error"] == "workspace gone" and "error" not in item
    edited = queue_items.edited(refused, item["id"], "new")
    assert edited == [{**item, "text": "new"}]
    assert queue_items.without(edited, item["id"]) == []


def test_an_unknown_item_is_not_found_and_a_full_queue_refuses_more():
    with pytest.raises(NotFound):
        queue_items.without([], "nope")
    with pytest.raises(NotFound):
        queue_items.edited([queue_items.new_item("x", 1.0)], None, "y")
    full = [queue_items.new_item(str(i), 1.0) for i in range(queue_items.MAX_ITEMS)]
    with pytest.raises(BadRequest):
        queue_items.added(full, queue_items.new_item("one more", 1.0))

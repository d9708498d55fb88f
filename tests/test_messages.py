"""The message vocabulary: the three time rules and text extraction."""

from __future__ import annotations

from api.rules import messages
from api.rules.messages import content_as_text, merge_timestamp, message_text, message_time, timestamp_or_ts


def test_merge_timestamp_is_a_finite_float_or_none():
    assert merge_timestamp({"timestamp": 5}) == 5.0
    assert merge_timestamp({"timestamp": "7.5"}) == 7.5
    for bad in (None, "", "soon", float("nan"), float("inf"), True, [1]):
        assert merge_timestamp({"timestamp": bad}) is None
    assert merge_timestamp("not a dict") is None


def test_merge_timestamp_never_reads_ts():
    assert merge_timestamp({"_ts": 5.0}) is None


def test_message_time_prefers_ts_over_timestamp():
    assert message_time({"_ts": 5.0, "timestamp": 9.0}) == 5.0
    assert message_time({"timestamp": 9.0}) == 9.0
    assert message_time({"_ts": "bad", "timestamp": 9.0}) == 9.0
    assert message_time({"_ts": None}) is None
    assert message_time(["not", "a", "dict"]) is None


def test_timestamp_or_ts_prefers_timestamp_and_falls_back_to_ts():
    assert timestamp_or_ts({"_ts": 5.0, "timestamp": 9.0}) == 9.0
    assert timestamp_or_ts({"_ts": 5.0}) == 5.0
    assert timestamp_or_ts({"_ts": 5.0, "timestamp": ""}) == 5.0
    assert timestamp_or_ts({}) is None
    assert timestamp_or_ts(None) is None


def test_content_as_text_keeps_strings_and_stringifies_the_rest():
    assert content_as_text("hi") == "hi"
    assert content_as_text(None) == ""
    assert content_as_text([{"type": "text", "text": "hi"}]) == "[{'type': 'text', 'text': 'hi'}]"


def test_message_text_joins_text_parts_and_bare_strings():
    msg = {"content": [{"type": "text", "text": "one"}, "two", {"type": "image_url"}, {"text": 3}]}
    assert message_text(msg) == "one\ntwo"
    assert message_text({"content": "plain"}) == "plain"
    assert message_text({"content": 7}) == ""
    assert message_text("not a dict") == ""


def test_the_visible_count_is_what_a_person_sees_each_answer_once_tool_rows_within_it():
    """The sidebar counted every row, tool results and an answer's separate steps included."""
    call = {"id": "c1", "function": {"name": "terminal", "arguments": "{}"}}
    rows = [
        {"role": "user", "content": "do it"},
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "{}"},
        {"role": "assistant", "content": "Done."},
        {"role": "user", "content": "thanks"},
        {"role": "assistant", "content": "You are welcome."},
    ]
    assert messages.visible_message_count(rows) == 4
    assert messages.visible_message_count([]) == 0
    assert (
        messages.visible_message_count([{"role": "system", "content": "s"}, {"role": "user", "content": "u"}])
        == 2
    )
    assert messages.visible_message_count(["not a row", {"role": "tool", "content": "orphan"}]) == 2


def test_the_visible_count_takes_rows_of_any_shape_without_raising():
    rows = [{"role": ["user"], "content": {"a": 1}}, "text", None, {"role": "assistant", "content": "x"}]
    assert messages.visible_message_count(rows) == 4

"""The compression anchor: which transcript row the marker follows."""

from __future__ import annotations

from api.rules.anchor import anchor_message_index, anchor_message_key, visible_messages_for_anchor

ROWS = [
    {"role": "user", "content": "first question", "_ts": 1.0},
    {"role": "assistant", "content": "", "tool_calls": [{"id": "c1"}], "_ts": 2.0},
    {"role": "tool", "content": "ls output", "_ts": 3.0},
    {"role": "assistant", "content": "first answer", "_ts": 4.0},
    {"role": "user", "content": "[CONTEXT COMPACTION — REFERENCE ONLY] earlier turns", "_ts": 5.0},
    {"role": "user", "content": "second   question", "_ts": 6.0},
    {"role": "assistant", "content": "", "_ts": 7.0},
]


def test_visible_rows_skip_tool_results_markers_and_empty_answers():
    assert [ROWS.index(m) for m in visible_messages_for_anchor(ROWS)] == [0, 1, 3, 5]


def test_the_recorded_index_wins_while_it_is_in_range():
    key = anchor_message_key(ROWS[3])
    assert anchor_message_index(ROWS, key, 2, recorded_idx=3) == 3
    assert anchor_message_index(ROWS, key, 2, recorded_idx=99) == 3  # out of range: found by its key


def test_a_session_without_a_recorded_index_is_anchored_by_its_key():
    key = {"role": "user", "ts": 6.0, "text": "second question", "attachments": 0}
    assert anchor_message_index(ROWS, key, 3) == 5


def test_a_key_whose_row_is_gone_anchors_nothing():
    key = {"role": "user", "ts": 60.0, "text": "second question", "attachments": 0}
    assert anchor_message_index(ROWS, key, 3) is None


def test_without_a_key_the_visible_index_counts_rows_a_person_sees():
    assert anchor_message_index(ROWS, None, 2) == 3
    assert anchor_message_index(ROWS, None, 9) is None
    assert anchor_message_index(ROWS, None, None) is None

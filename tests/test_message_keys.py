"""Message keys, compaction markers and api_content reconciliation."""

from __future__ import annotations

import copy
import json

from hypothesis import given, settings
from hypothesis import strategies as st

from api.rules import message_keys
from api.rules.message_keys import (
    INVALID_ROW_ID,
    KnownTexts,
    collapse,
    context_messages_include_compression_marker,
    fingerprint,
    is_context_compression_marker,
    message_content_key,
    message_dedup_key,
    message_merge_key,
    message_visible_key,
    reconcile_api_content_sidecars,
    row_id,
    same_json,
    strip_workspace_tag,
    tokens,
)

MARKER_TEXT = "[CONTEXT COMPACTION — REFERENCE ONLY] Earlier turns were compacted into the summary below."


# ----------------------------------------------------------------------------- timestamps and keys


def test_merge_key_uses_whole_seconds_and_tool_fields():
    row = {"role": "tool", "content": "out", "timestamp": 12.9, "tool_call_id": "c1", "tool_name": "terminal"}
    assert message_merge_key(row) == ("legacy", "tool", "out", "12", "c1", "terminal", "")
    assert message_merge_key(dict(row, timestamp=12.1)) == message_merge_key(row)
    assert message_merge_key(dict(row, timestamp=13.0)) != message_merge_key(row)


def test_merge_key_timestamp_slot_for_missing_text_and_infinite_values():
    assert message_merge_key({"role": "user", "content": "x"})[3] == ""
    assert message_merge_key({"role": "user", "content": "x", "timestamp": "soon"})[3] == "soon"
    assert (
        message_merge_key({"role": "user", "content": "x", "timestamp": float("inf")})[3] == "<invalid:inf>"
    )


def test_stable_id_wins_over_every_other_field():
    assert message_merge_key({"id": 42, "role": "user", "content": "x"}) == ("message_id", "42")
    assert message_dedup_key({"message_id": "m1", "content": "y"}) == ("message_id", "m1")


def test_dedup_key_keeps_full_precision():
    row = {"role": "user", "content": "x", "timestamp": 12.9}
    assert message_dedup_key(row)[3] == "12.9"
    assert message_dedup_key(row) != message_dedup_key(dict(row, timestamp=12.1))


def test_tool_calls_are_part_of_merge_and_visible_keys_in_canonical_json():
    calls = [{"id": "c", "function": {"name": "t", "arguments": "{}"}, "type": "function"}]
    row = {"role": "assistant", "content": "", "tool_calls": calls, "timestamp": 1.0}
    assert message_merge_key(row)[6] == json.dumps(calls, sort_keys=True)
    assert message_visible_key(row) == ("assistant", "", json.dumps(calls, sort_keys=True))


def test_content_key_collapses_whitespace_and_state_side_drops_workspace_tag():
    side = {"role": "user", "content": "  hello \n\n world "}
    state = {"role": "user", "content": "[Workspace::v1: /home/me]\nhello world"}
    legacy = {"role": "user", "content": "[Workspace: /home/me] hello world"}
    assert message_content_key(side) == ("user", "hello world", "", "")
    assert message_content_key(state, state_side=True) == message_content_key(side)
    assert message_content_key(legacy, state_side=True) == message_content_key(side)
    assert message_content_key(state) != message_content_key(side)  # the sidecar side keeps the tag


def test_workspace_tag_is_only_stripped_from_user_rows():
    row = {"role": "assistant", "content": "[Workspace::v1: /w] text"}
    assert message_visible_key(row, state_side=True)[1] == "[Workspace::v1: /w] text"


def test_every_key_gains_api_content_when_present():
    row = {"role": "user", "content": "x", "timestamp": 1.0, "api_content": "api x"}
    for key in (
        message_merge_key(row),
        message_dedup_key(row),
        message_content_key(row),
        message_visible_key(row),
    ):
        assert key[-1] == "api x"
    assert message_visible_key(dict(row, api_content="")) == ("user", "x", "")


def test_non_dict_rows_have_a_repr_key():
    assert message_merge_key(["x"]) == ("non_dict", "['x']")
    assert message_visible_key(None) == ("non_dict", "None")


def test_row_id_reads_every_alias_and_rejects_conflicts():
    assert row_id({"_row_id": 5}) == 5
    assert row_id({"_state_db_row_id": "6", "state_db_row_id": 6.0}) == 6
    assert row_id({}) is None
    assert row_id({"_row_id": 5, "_db_row_id": 6}) is INVALID_ROW_ID
    assert row_id({"_row_id": -1}) is INVALID_ROW_ID
    assert row_id({"_row_id": "abc"}) is INVALID_ROW_ID
    assert row_id({"_row_id": True}) is INVALID_ROW_ID


def test_strip_workspace_tag_returns_the_same_object_when_there_is_none():
    text = "[not a tag] hello"
    assert strip_workspace_tag(text) is text
    assert strip_workspace_tag("[Workspace::v1: /a/b]\n\nhi") == "hi"


# ----------------------------------------------------------------------------- text helpers

_WS = st.sampled_from([" ", "  ", "\n", "\t", "\r\n", "\u00a0", "\u2003", "\x0b"])
_WORDS = st.lists(
    st.text(alphabet=st.characters(blacklist_categories=("Zs", "Zl", "Zp", "Cc")), min_size=1), max_size=8
)


@settings(max_examples=300, deadline=None)
@given(_WORDS, st.data())
def test_fingerprint_is_the_same_for_texts_equal_after_collapsing(words, data):
    def spaced():
        seps = [data.draw(st.lists(_WS, min_size=1, max_size=3)) for _ in range(len(words) + 1)]
        lead, *mid = ["".join(s) for s in seps]
        return data.draw(st.sampled_from(["", lead])) + "".join(
            w + s for w, s in zip(words, mid, strict=True)
        )

    a, b = spaced(), spaced()
    assert collapse(a) == collapse(b)
    assert fingerprint(a) == fingerprint(b)


def test_fingerprint_of_long_texts_reads_the_last_token():
    base = "start " + "x" * 100
    assert fingerprint(base + " end") != fingerprint(base + " fin")
    assert fingerprint(base + " end" + " " * 90) == fingerprint(base + "\nend")
    assert fingerprint("   ") == ""


_JSON = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.floats(allow_nan=False), st.text(max_size=3)),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=2), inner, max_size=3)
    ),
    max_leaves=8,
)


@settings(max_examples=300, deadline=None)
@given(_JSON, _JSON)
def test_same_json_never_claims_equality_that_json_would_deny(x, y):
    if same_json(x, y):
        assert json.dumps(x, sort_keys=True) == json.dumps(y, sort_keys=True)
    assert same_json(x, copy.deepcopy(x))


def test_same_json_tells_numbers_of_different_json_apart():
    assert same_json([{"a": 1}], [{"a": 1}])
    assert not same_json([{"a": 1}], [{"a": 1.0}])
    assert not same_json([{"a": 1}], [{"a": True}])
    assert not same_json([0.0], [-0.0])


def test_tokens_are_casefolded_words():
    assert tokens("Hello, WORLD! it's  ok") == "hello world it s ok"


# ----------------------------------------------------------------------------- compaction markers


def test_agent_summary_row_is_a_marker():
    assert is_context_compression_marker({"role": "assistant", "content": MARKER_TEXT})
    assert is_context_compression_marker({"role": "user", "content": "\n  " + MARKER_TEXT.lower()})


def test_marker_in_text_parts_is_recognised():
    msg = {"role": "user", "content": [{"type": "input_text", "text": MARKER_TEXT}]}
    assert is_context_compression_marker(msg)


def test_unbracketed_marker_needs_the_compressed_summary_flag():
    text = "Context compaction summary: things happened."
    assert not is_context_compression_marker({"role": "assistant", "content": text})
    assert is_context_compression_marker({"role": "assistant", "content": text, "_compressed_summary": True})


def test_preserved_task_list_and_arc_summary_are_markers_for_the_detector_only():
    task = {"role": "user", "content": "[Your active task list was preserved across context compression] ..."}
    arc = {"role": "user", "content": "[Session arc summary] ..."}
    assert is_context_compression_marker(task) and is_context_compression_marker(arc)
    assert not context_messages_include_compression_marker([task, arc])


def test_tool_rows_and_rows_without_role_are_never_markers():
    assert not is_context_compression_marker({"role": "tool", "content": MARKER_TEXT})
    assert not is_context_compression_marker({"content": MARKER_TEXT})


def test_merged_prior_context_form_is_not_recognised():
    merged = "[PRIOR CONTEXT — for reference only; not a new message]\nold\n\n" + MARKER_TEXT
    assert not is_context_compression_marker({"role": "user", "content": merged})


def test_narrow_marker_test_finds_the_summary_anywhere_in_the_context():
    rows = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": MARKER_TEXT}]
    assert context_messages_include_compression_marker(rows)
    assert not context_messages_include_compression_marker(
        [{"role": "user", "content": "context compaction"}]
    )
    assert not context_messages_include_compression_marker("not a list")


def test_narrow_marker_test_reads_text_parts_and_skips_rows_without_text():
    parts = {"role": "assistant", "content": [{"type": "text", "text": MARKER_TEXT}]}
    assert context_messages_include_compression_marker([{"role": "assistant", "content": None}, parts])
    assert not context_messages_include_compression_marker([{"role": "assistant", "content": None}, "x"])


# ----------------------------------------------------------------------------- api_content reconciliation


def test_api_content_goes_to_the_row_with_the_same_stable_id():
    side = [{"role": "user", "content": "x", "id": "m1"}, {"role": "user", "content": "x", "id": "m2"}]
    reconcile_api_content_sidecars(side, [{"role": "user", "content": "x", "id": "m2", "api_content": "api"}])
    assert "api_content" not in side[0] and side[1]["api_content"] == "api"


def test_api_content_goes_to_the_row_with_the_same_row_id():
    side = [{"role": "user", "content": "x", "_row_id": 3}, {"role": "user", "content": "x", "_row_id": 4}]
    reconcile_api_content_sidecars(
        side, [{"role": "user", "content": "x", "_state_db_row_id": 4, "api_content": "a"}]
    )
    assert side[1]["api_content"] == "a" and "api_content" not in side[0]


def test_api_content_goes_to_the_row_with_the_same_role_and_timestamp():
    side = [
        {"role": "user", "content": "one", "timestamp": 1.5},
        {"role": "user", "content": "two", "timestamp": 2.5},
    ]
    reconcile_api_content_sidecars(
        side, [{"role": "user", "content": "changed", "timestamp": 2.5, "api_content": "a"}]
    )
    assert side[1]["api_content"] == "a"


def test_api_content_falls_back_to_the_same_second_then_to_the_text():
    side = [
        {"role": "user", "content": "one", "timestamp": 1.2},
        {"role": "user", "content": "[x] two", "timestamp": None},
    ]
    reconcile_api_content_sidecars(
        side, [{"role": "user", "content": "one", "timestamp": 1.7, "api_content": "a"}]
    )
    assert side[0]["api_content"] == "a"
    reconcile_api_content_sidecars(side, [{"role": "user", "content": "[x]  two", "api_content": "b"}])
    assert side[1]["api_content"] == "b"


def test_api_content_is_never_guessed_between_two_candidates():
    side = [
        {"role": "user", "content": "x", "timestamp": 1.0},
        {"role": "user", "content": "x", "timestamp": 1.0},
    ]
    reconcile_api_content_sidecars(
        side, [{"role": "user", "content": "x", "timestamp": 1.0, "api_content": "a"}]
    )
    assert all("api_content" not in m for m in side)


def test_api_content_already_on_the_sidecar_row_is_kept():
    side = [{"role": "user", "content": "x", "timestamp": 1.0, "api_content": "mine"}]
    reconcile_api_content_sidecars(
        side, [{"role": "user", "content": "x", "timestamp": 1.0, "api_content": "theirs"}]
    )
    assert side[0]["api_content"] == "mine"


def test_the_texts_known_to_pass_are_forgotten_past_a_bound_in_characters(monkeypatch):
    """Every chat turn asks about its transcript, and the texts that passed were kept up to 200,000 of them
    whatever their length: each turn's answer stayed in memory. Past ``_MEMO_MAX_CHARS`` characters they
    are forgotten, and asked about again they are tested again."""
    monkeypatch.setattr(message_keys, "_MEMO_MAX_CHARS", 10_000)
    tested: list[str] = []
    known = KnownTexts(lambda text: tested.append(text) is None)
    transcript: list[str] = []
    for turn in range(100):
        transcript.append(f"answer {turn} " + "word " * 200)
        assert known.failing(transcript) == set()
        assert sum(map(len, known.known)) <= 10_000 + 1_100
    assert len(tested) == 100
    assert known.failing([transcript[0]]) == set()
    assert tested[-1] == transcript[0]  # forgotten, so tested again

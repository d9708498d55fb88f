"""The append-only merge rule by rule and the reconciled view (docs/reconciliation.md)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import api.store.models
from api.rules.reconcile import merge_session_messages_append_only
from api.store.models import reconciled_state_db_messages_for_session
from talaria_testing.transcripts import session_view

CALL_A = [
    {"id": "call_a", "type": "function", "function": {"name": "terminal", "arguments": '{"command": "ls"}'}}
]
CALL_B = [
    {"id": "call_b", "type": "function", "function": {"name": "terminal", "arguments": '{"command": "pwd"}'}}
]


def u(text, ts, **extra):
    return {"role": "user", "content": text, "timestamp": ts, **extra}


def a(text, ts, **extra):
    return {"role": "assistant", "content": text, "timestamp": ts, **extra}


def call(ts, calls=CALL_A, **extra):
    return {"role": "assistant", "content": "", "tool_calls": calls, "timestamp": ts, **extra}


def tool(text, ts, call_id="call_a"):
    return {"role": "tool", "content": text, "tool_call_id": call_id, "name": "terminal", "timestamp": ts}


def merge(sidecar, state, w=None, b=None):
    return merge_session_messages_append_only(sidecar, state, truncation_watermark=w, truncation_boundary=b)


def texts(rows):
    return [r["content"] for r in rows]


U1, A1, U2, A2 = (
    u("first question", 1.0),
    a("first answer", 2.0),
    u("second question", 3.0),
    a("second answer", 4.0),
)


# ----------------------------------------------------------------------------- worked examples


def test_example_newer_state_rows_are_appended():
    assert merge([U1, A1], [U1, A1, U2, A2]) == [U1, A1, U2, A2]


def test_example_undo_watermark_keeps_removed_rows_out():
    assert merge([U1, A1], [U1, A1, U2, A2], w=2.0, b=2.0) == [U1, A1]


def test_example_cold_zero_watermark_returns_nothing():
    assert merge([], [U1, A1, U2, A2], w=0.0, b=0.0) == []


def test_example_cold_without_watermark_returns_state_deduplicated():
    assert merge([], [U1, A1, dict(A1), U2]) == [U1, A1, U2]


def test_example_cold_watermark_equal_to_boundary_keeps_rows_up_to_it():
    assert merge([], [U1, A1, U2, A2], w=2.0, b=2.0) == [U1, A1]


def test_example_cold_advanced_watermark_keeps_both_sides_of_the_cut():
    q3, r3 = u("third question", 5.0), a("third answer", 6.0)
    assert merge([], [U1, A1, U2, A2, q3, r3], w=5.0, b=2.0) == [U1, A1, q3, r3]


def test_example_cold_legacy_watermark_without_boundary_keeps_rows_up_to_it():
    late = a("late", 6.0)
    assert merge([], [U1, A1, U2, A2, late], w=5.0) == [U1, A1, U2, A2]


def test_example_edit_keeps_the_edited_turn_and_its_reply():
    edited, reply = u("edited question", 5.0), a("reply to edit", 6.0)
    assert merge([U1, A1, edited], [U1, A1, U2, A2, edited, reply], w=5.0, b=2.0) == [U1, A1, edited, reply]


def test_example_state_only_user_row_is_inserted_chronologically():
    lost = u("lost question", 3.0)
    assert merge([U1, A2], [U1, lost, A2]) == [U1, lost, A2]


def test_seed_scenario_compressed_context_does_not_replay_older_rows():
    now = 1_800_000_000.0
    context = [u("one", now), a("four", now + 1e-6)]
    state = [u("one", 1.0), a("two", 2.0), u("three", 3.0), a("four", 4.0), a("", 4.1)]
    assert len(merge(context, state, w=now + 1e-6, b=now + 1e-6)) == 2


def test_seed_scenario_with_original_timestamps_and_no_watermark_replays_rows():
    context = [u("one", 1.0), a("four", 4.0)]
    state = [u("one", 1.0), a("two", 2.0), u("three", 3.0), a("four", 4.0), a("", 4.1)]
    assert texts(merge(context, state)) == [
        "one",
        "three",
        "four",
        "",
    ]  # the #4836 failure the watermark prevents


# ----------------------------------------------------------------------------- before the rules


def test_api_content_state_api_content_is_copied_onto_the_matching_sidecar_row():
    side = [U1, a("answer", 2.0)]
    state = [U1, a("answer", 2.0, api_content="answer with api detail")]
    out = merge(side, state)
    assert out == side and len(out) == 2
    assert side[1]["api_content"] == "answer with api detail"


def test_empty_state_empty_state_returns_a_copy_of_the_sidecar():
    side = [U1, A1]
    out = merge(side, [])
    assert out == side and out is not side


def test_cold_reconstruction_cold_reconstruction_drops_rows_without_timestamps_under_a_watermark():
    assert merge([], [U1, u("no time", None), A1], w=3.0, b=3.0) == [U1, A1]


def test_transcript_sidecar_only_rows_stay_in_place():
    note = a("local error note", 2.5, _error=True)
    side = [U1, A1, note]
    out = merge(side, [U1, A1, u("later question", 5.0)])
    assert texts(out) == ["first question", "first answer", "local error note", "later question"]


def test_interrupted_turn_interrupted_turn_returns_the_sidecar_unchanged():
    side = [U1, a("partial answ", 2.0, _partial=True), a("stream failed", 2.5, _error=True)]
    assert merge(side, [U1, a("partial answer complete", 2.2), U2]) == side


def test_interrupted_turn_error_without_partial_is_not_an_interrupted_turn():
    side = [U1, a("stream failed", 2.5, _error=True)]
    assert len(merge(side, [U1, a("the real answer", 3.0)])) == 3


# ----------------------------------------------------------------------------- the rules, in order


def test_screenshot_mirror_native_image_mirror_of_a_sidecar_user_row_is_absorbed():
    side = [u("look at this [screenshot]", 5.0), a("nice picture", 6.0)]
    native = {
        "role": "user",
        "content": [
            {"type": "text", "text": "look at this"},
            {"type": "image_url", "image_url": {"url": "data:x"}},
        ],
        "timestamp": 5.0,
    }
    assert merge(side, [native, a("nice picture", 6.0)]) == side


def test_screenshot_mirror_ambiguous_native_image_mirror_is_not_guessed():
    side = [u("look [screenshot]", 5.0), u("look [screenshot]", 5.0)]
    native = {
        "role": "user",
        "content": [{"type": "text", "text": "look"}, {"type": "image_url"}],
        "timestamp": 5.0,
    }
    assert len(merge(side, [native])) == 3


def test_replay_prefix_replay_ignores_whitespace_workspace_tag_and_timestamps():
    side = [u("  hello\n  world ", 1.0), a("reply\n\ntext", 2.0)]
    state = [u("[Workspace::v1: /home/me/proj]\nhello world", 1.5), a("reply text", 2.5)]
    assert merge(side, state) == side


def test_replay_prefix_replay_matches_fuzzily_on_small_sessions():
    side = [U1, a("Here is the answer.", 2.0)]
    assert merge(side, [U1, a("here is the ANSWER", 9.0)]) == side


def test_same_row_id_same_row_id_is_absorbed_even_when_the_text_changed():
    side = [U1, a("draft", 2.0, _state_db_row_id=7)]
    assert merge(side, [U1, a("final text", 3.0, _state_db_row_id=7)]) == side


def test_same_row_id_row_id_with_conflicting_api_content_is_not_absorbed():
    side = [U1, a("draft", 2.0, _state_db_row_id=7, api_content="one")]
    out = merge(side, [U1, a("final text", 3.0, _row_id=7, api_content="two")])
    assert len(out) == 3


def test_watermark_rows_newer_than_the_watermark_stay_out_until_a_turn_advanced_it():
    assert merge([U1, A1], [U1, A1, U2, A2], w=2.0, b=2.0) == [U1, A1]


def test_watermark_after_a_new_turn_only_rows_newer_than_the_sidecar_return():
    q3 = u("new question", 5.0)
    side = [U1, A1, q3]
    out = merge(side, [U1, A1, U2, A2, q3, a("new answer", 6.0)], w=2.0, b=2.0)
    assert texts(out) == ["first question", "first answer", "new question", "new answer"]


def test_watermark_rows_older_than_the_watermark_with_unknown_content_stay_out():
    side = [u("summary start", 10.0), a("summary end", 11.0)]
    assert merge(side, [U1, A1, U2, A2], w=11.0, b=11.0) == side


def test_watermark_rows_older_than_the_watermark_with_known_content_are_judged_further():
    side = [U1, dict(A1)]
    out = merge(side, [dict(A1, timestamp=1.5, _turnDuration=2.0)], w=5.0, b=5.0)
    assert out == [U1, dict(A1, _turnDuration=2.0)]  # absorbed as a visible duplicate, its display keys kept


def test_watermark_removed_tool_call_rows_stay_out_after_an_edit():
    side = [U1, call(2.0), tool("x", 2.5), a("done", 3.0), u("edited", 10.0)]
    removed = [u("second question", 4.0), call(5.0, CALL_B), tool("y", 5.5, "call_b"), a("second done", 6.0)]
    state = [*side[:4], *removed, u("edited", 10.0), a("reply", 11.0)]
    out = merge(side, state, w=10.0, b=3.0)
    assert texts(out) == ["first question", "", "x", "done", "edited", "reply"]


def test_watermark_same_second_copy_of_a_kept_row_stays_out_after_undo():
    side = [U1, a("sure", 2.2)]
    assert merge(side, [U1, a("sure", 2.2), u("again", 2.4), a("sure", 2.7)], w=2.2, b=2.2) == side


def test_watermark_same_second_edit_of_a_user_row_stays_out():
    assert merge([U1, A1], [U1, A1, u("pre-edit text", 3.0)], w=3.0, b=3.0) == [U1, A1]


def test_exact_copy_duplicate_state_rows_are_added_once():
    assert merge([U1], [U1, A1, dict(A1)]) == [U1, A1]


def test_same_message_same_second_copy_of_a_replayed_tool_call_is_absorbed():
    side = [U1, call(2.2), tool("listing", 2.3), a("done", 3.0), u("next", 5.0)]
    state = [U1, call(2.2), tool("listing", 2.3), a("done", 3.0), call(2.7)]
    assert merge(side, state) == side


def test_same_message_state_row_with_a_known_message_id_is_not_added_again():
    side = [U1, a("draft", 2.0, id="m7")]
    assert merge(side, [U1, a("final", 9.0, id="m7")]) == side


def test_visible_duplicate_visible_duplicate_out_of_order_is_absorbed():
    x, y = a("answer x", 10.0), u("question y", 12.0)
    side = [U1, A1, x, y]
    assert merge(side, [U1, A1, u("question y", 12.5), a("answer x", 10.5)]) == side


def test_visible_duplicate_counts_each_sidecar_row_once():
    side = [U1, A1, a("ok", 10.0), u("more", 11.0)]
    state = [U1, A1, u("more", 11.5), a("ok", 12.0), a("ok", 13.0)]
    out = merge(side, state)
    assert texts(out).count("ok") == 2


def test_visible_duplicate_newer_copy_of_an_unreplayed_tool_call_row_is_absorbed():
    """The row repeats the transcript's tool calls with no text; the row under the replay's cursor is
    another, so the visible-duplicate rule takes it, however new."""
    side = [U1, call(2.0)]
    assert merge(side, [call(5.0)]) == side


def test_late_row_older_tool_call_with_known_content_is_inserted_chronologically():
    side = [U1, call(2.0), tool("x", 2.5), a("done", 6.0)]
    out = merge(side, [U1, call(2.0), tool("x", 2.5), call(3.0, CALL_B), a("done", 6.0)])
    assert [r.get("tool_calls") for r in out] == [None, CALL_A, None, CALL_B, None]


def test_late_row_older_tool_call_with_unknown_content_is_absorbed():
    side = [U1, a("done", 6.0)]
    assert merge(side, [U1, dict(call(3.0), content="checking"), a("done", 6.0)]) == side


def test_late_row_only_rows_not_newer_than_a_tool_call_decide_its_insertion():
    side = [U1, a("done", 6.0)]
    state = [U1, call(3.0), a("done", 6.0), a("", 7.0)]
    once = merge(side, state)
    assert once == [U1, a("done", 6.0), a("", 7.0)]
    assert merge(once, state) == once  # the appended empty row does not pull the tool call in later


def test_late_row_older_known_assistant_row_is_absorbed():
    side = [U1, A1, U2]
    assert merge(side, [U1, A1, U2, dict(A1, timestamp=2.5)]) == side


def test_late_row_same_second_agent_row_after_full_replay_is_appended():
    side = [U1, a("first answer", 3.0)]
    out = merge(side, [U1, a("first answer", 3.0), a("extra", 3.0)], w=3.0, b=3.0)
    assert texts(out) == ["first question", "first answer", "extra"]


def test_append_rows_newer_than_the_sidecar_are_appended_in_state_order():
    assert merge([U1], [U1, A1, U2]) == [U1, A1, U2]


def test_chronological_insert_refuses_to_become_the_first_row():
    side = [u("kept question", 5.0), a("kept answer", 6.0)]
    assert merge(side, [u("compacted away", 1.0)] + side) == side


def test_chronological_insert_skips_past_a_tool_call_block():
    side = [U1, call(2.0), tool("x", 4.0), a("done", 5.0)]
    out = merge(side, [U1, call(2.0), tool("x", 4.0), u("lost", 3.0), a("done", 5.0)])
    assert texts(out) == ["first question", "", "x", "lost", "done"]


def test_chronological_insert_puts_a_user_row_before_a_same_time_assistant_row():
    side = [U1, a("answer", 3.0), u("later", 9.0)]
    out = merge(side, [U1, u("lost", 3.0), a("answer", 3.0), u("later", 9.0)])
    assert texts(out) == ["first question", "lost", "answer", "later"]


def test_display_only_keys_of_a_skipped_duplicate_fill_the_kept_row():
    side = [U1, dict(A1)]
    out = merge(side, [U1, dict(A1, _turnDuration=1.5, _usedModel="m")])
    assert out[1]["_turnDuration"] == 1.5 and out[1]["_usedModel"] == "m"
    assert "_turnDuration" not in side[1]


def test_large_sessions_skip_fuzzy_matching_and_still_append_new_rows():
    side = [u(f"question {i}", float(i)) if i % 2 == 0 else a(f"answer {i}", float(i)) for i in range(2400)]
    state = [dict(m) for m in side] + [
        u("question 1", 5000.0)
    ]  # fuzzily like a hundred rows, exactly like one
    out = merge(side, state)
    assert len(out) == 2401 and out[-1]["timestamp"] == 5000.0


# ----------------------------------------------------------------------------- properties

_TEXTS = st.sampled_from(["a", "b", "hello", "hello world", "", "x y", "reply", "Hello"])
_TS = st.one_of(st.none(), st.sampled_from([0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 4.5, 5.0, 7.0]))


@st.composite
def _row(draw, timestamp):
    role = draw(st.sampled_from(["user", "assistant", "assistant", "tool"]))
    row = {"role": role, "content": draw(_TEXTS), "timestamp": timestamp}
    if role == "assistant" and draw(st.booleans()):
        row["tool_calls"] = draw(st.sampled_from([CALL_A, CALL_B]))
    if role == "tool":
        row["tool_call_id"] = draw(st.sampled_from(["call_a", "call_b"]))
    return row


@st.composite
def _case(draw):
    """A conversation as the agent stored it (timestamped, in time order), the transcript's view of it
    (any subset, plus local rows of its own), and a watermark/boundary pair."""
    steps = draw(st.lists(st.sampled_from([0.25, 0.5, 1.0]), max_size=10))
    history = [draw(_row(0.5 + sum(steps[:i]))) for i in range(len(steps))]
    # Agent messages differ from one another (tool calls carry no text). With repeated identical texts
    # the replay cursor and the per-key counts of rules b/h depend on row order, and a second merge can
    # then add a row the first absorbed (hermes-webui does the same).
    for i, row in enumerate(history):
        if row["content"] and not row.get("tool_calls"):
            row["content"] += f" #{i}"
    local = [draw(_row(draw(_TS))) for _ in range(draw(st.integers(0, 3)))]
    side = [dict(m) for m in history if draw(st.booleans())] + local
    state = [dict(m) for m in history]
    watermark = draw(st.one_of(st.none(), st.sampled_from([0.0, 1.0, 2.0, 3.0, 4.5])))
    boundary = watermark if watermark is None else draw(st.sampled_from([watermark, 1.0, 0.5]))
    return side, state, watermark, boundary


def _subsequence_by_identity(part, whole):
    it = iter(whole)
    return all(any(x is y for y in it) for x in part)


@settings(max_examples=300, deadline=None)
@given(_case())
def test_property_merge_never_drops_or_reorders_a_sidecar_row(case):
    side, state, w, b = case
    out = merge(side, state, w, b)
    assert _subsequence_by_identity(side, out)


@settings(max_examples=300, deadline=None)
@given(_case())
def test_property_merging_the_output_again_adds_nothing(case):
    side, state, w, b = case
    once = merge(side, state, w, b)
    twice = merge(once, state, w, b)
    assert len(twice) == len(once) and all(x is y for x, y in zip(twice, once, strict=True))


@settings(max_examples=300, deadline=None)
@given(_case())
def test_property_no_state_row_older_than_the_watermark_joins_a_transcript(case):
    side, state, w, b = case
    if w is None or not side:
        return
    for row in merge(side, state, w, b):
        if not any(row is m for m in side):
            assert row["timestamp"] >= w


@settings(max_examples=300, deadline=None)
@given(_case())
def test_property_cold_reconstruction_keeps_only_rows_outside_the_truncated_span(case):
    _, state, w, b = case
    out = merge([], state, w, b)
    if w == 0:
        assert out == []
    elif w is not None:
        advanced = b is not None and b < w
        assert all(
            r["timestamp"] <= (b if advanced else w) or (advanced and r["timestamp"] >= w) for r in out
        )


@settings(max_examples=200, deadline=None)
@given(_case())
def test_property_empty_state_returns_the_sidecar_unchanged(case):
    side, _, w, b = case
    out = merge(side, [], w, b)
    assert len(out) == len(side) and all(x is y for x, y in zip(out, side, strict=True))


# ----------------------------------------------------------------------------- the reconciled view


def test_reconciled_of_no_session_is_empty():
    assert reconciled_state_db_messages_for_session(None, state_messages=[U1]) == []


def test_reconciled_display_merges_messages_with_state():
    s = session_view(messages=[U1, A1], context_messages=[A1])
    assert reconciled_state_db_messages_for_session(s, state_messages=[U1, A1, U2]) == [U1, A1, U2]


def test_reconciled_context_merges_only_rows_after_the_mirrored_context():
    s = session_view(messages=[U1, A1, U2], context_messages=[U1, A1])
    out = reconciled_state_db_messages_for_session(s, prefer_context=True, state_messages=[U1, A1, U2, A2])
    assert out == [U1, A1, U2, A2]


def test_reconciled_context_falls_back_to_messages_when_the_context_is_empty():
    s = session_view(messages=[U1, A1], context_messages=[])
    assert reconciled_state_db_messages_for_session(s, prefer_context=True, state_messages=[U1, A1]) == [
        U1,
        A1,
    ]


def test_reconciled_reads_state_db_through_api_models_at_call_time(monkeypatch):
    calls = []

    def fake(*args, **kwargs):
        calls.append((args, kwargs))
        return [U1, A1, U2]

    monkeypatch.setattr(api.store.models, "get_state_db_session_messages", fake)
    out = reconciled_state_db_messages_for_session(session_view(session_id="abc", messages=[U1]))
    assert calls == [(("abc",), {})]
    assert out == [U1, A1, U2]


def test_reconciled_seed_scenario_returns_the_compressed_context():
    now = 1_800_000_000.0
    context = [u("one", now), a("four", now + 1e-6)]
    messages = [u("one", 1.0), a("two", 2.0), u("three", 3.0), a("four", 4.0)]
    s = session_view(
        messages=messages,
        context_messages=context,
        truncation_watermark=now + 1e-6,
        truncation_boundary=now + 1e-6,
    )
    state = messages + [a("", 4.1)]
    assert len(reconciled_state_db_messages_for_session(s, prefer_context=True, state_messages=state)) == 2


MARKER = a("[CONTEXT COMPACTION — REFERENCE ONLY] Earlier turns were compacted into the summary below.", 50.0)


def test_reconciled_compacted_context_without_anchor_is_returned_as_is():
    s = session_view(messages=[U1, A1, U2, A2], context_messages=[MARKER, A2])
    out = reconciled_state_db_messages_for_session(
        s, prefer_context=True, state_messages=[U1, A1, U2, A2, a("x", 99.0)]
    )
    assert out == [MARKER, A2]


def test_reconciled_compacted_context_merges_rows_after_the_anchor():
    anchor = {"role": "assistant", "ts": 4.0, "text": "second answer", "attachments": 0}
    s = session_view(
        messages=[U1, A1, U2, A2], context_messages=[MARKER, A2], compression_anchor_message_key=anchor
    )
    new = [u("after", 60.0), a("after answer", 61.0)]
    out = reconciled_state_db_messages_for_session(
        s, prefer_context=True, state_messages=[U1, A1, U2, A2, *new]
    )
    assert out == [MARKER, A2, *new]


def test_reconciled_compacted_context_with_an_anchor_missing_from_state_is_returned_as_is():
    anchor = {"role": "assistant", "ts": 77.0, "text": "gone", "attachments": 0}
    s = session_view(messages=[U1], context_messages=[MARKER, A2], compression_anchor_message_key=anchor)
    out = reconciled_state_db_messages_for_session(
        s, prefer_context=True, state_messages=[U1, A1, u("x", 80.0)]
    )
    assert out == [MARKER, A2]


def test_reconciled_anchor_timestamp_may_be_iso_8601():
    anchor = {"role": "assistant", "ts": "1970-01-01T00:00:04Z", "text": "second answer", "attachments": 0}
    s = session_view(
        messages=[U1, A1, U2, A2], context_messages=[MARKER, A2], compression_anchor_message_key=anchor
    )
    new = u("after", 60.0)
    out = reconciled_state_db_messages_for_session(
        s, prefer_context=True, state_messages=[U1, A1, U2, A2, new]
    )
    assert out == [MARKER, A2, new]


def test_reconciled_claimed_cli_session_uses_its_longer_messages():
    s = session_view(messages=[U1, A1, U2], context_messages=[U1, A1], is_cli_session=True)
    out = reconciled_state_db_messages_for_session(s, prefer_context=True, state_messages=[U1, A1, U2, A2])
    assert out == [U1, A1, U2, A2]


def test_reconciled_read_only_cli_session_keeps_its_context():
    s = session_view(messages=[U1, A1, U2], context_messages=[U1, A1], is_cli_session=True, read_only=True)
    out = reconciled_state_db_messages_for_session(s, prefer_context=True, state_messages=[U1, A1])
    assert out == [U1, A1]


@st.composite
def _replay_case(draw):
    """A transcript and a state that share a long prefix, with tool calls, tags, api_content and extras."""
    rows = draw(st.lists(_row(draw(st.sampled_from([1.0, 2.0, 3.0]))), min_size=1, max_size=12))
    side = [dict(m) for m in rows]
    state = [dict(m) for m in rows]
    for i in draw(st.lists(st.integers(0, len(rows) - 1), max_size=3)):
        change = draw(st.sampled_from(["tag", "both_tagged", "api", "display", "spaces", "list", "text"]))
        if change == "tag" and state[i]["role"] == "user":
            state[i]["content"] = "[Workspace::v1: /w]\n" + rows[i]["content"]
        elif change == "both_tagged":
            state[i]["content"] = side[i]["content"] = "[Workspace::v1: /w]\n" + rows[i]["content"]
        elif change == "api":
            state[i]["api_content"] = "api " + rows[i]["content"]
        elif change == "display":
            state[i]["_turnDuration"] = 1.0
        elif change == "spaces":
            state[i]["content"] = " " + rows[i]["content"] + "\n"
        elif change == "list":
            state[i]["content"] = [{"type": "text", "text": rows[i]["content"]}]
        else:
            state[i]["content"] = "changed"
    watermark = draw(st.sampled_from([None, 1.0, 2.0]))
    return side, state + draw(st.lists(_row(9.0), max_size=2)), watermark


@settings(max_examples=300, deadline=None)
@given(_replay_case())
def test_property_column_wise_replay_decides_like_the_per_row_replay(case):
    from api.rules import reconcile

    side, state, w = case
    fast = merge([dict(m) for m in side], [dict(m) for m in state], w, 0.5 if w else None)
    original = reconcile._Merge._replayed_block
    reconcile._Merge._replayed_block = lambda self: 0
    try:
        slow = merge([dict(m) for m in side], [dict(m) for m in state], w, 0.5 if w else None)
    finally:
        reconcile._Merge._replayed_block = original
    assert fast == slow


@pytest.mark.xfail(
    strict=True,
    reason="known: inserting in time order refuses the first position, so a second merge can place a row the first refused",
)
def test_merging_again_after_a_refused_insert_before_the_oldest_row_adds_nothing():
    """Found by the idempotence property (hypothesis, 2026-12-02). The merged display is computed from the
    session file each time and never saved back, so a person does not see this; kept visible until fixed."""
    tool = {"role": "tool", "tool_call_id": "call_a"}
    side = [
        dict(tool, content="a #2", timestamp=1.0),
        dict(tool, content="a #5", timestamp=1.75),
        {"role": "user", "content": "a", "timestamp": None},
    ]
    state = [{"role": "user", "content": f"a #{i}", "timestamp": 0.5 + 0.25 * i} for i in range(10)]
    state[2], state[5] = side[0], side[1]
    once = merge(side, state, None, None)
    assert len(merge(once, state, None, None)) == len(once)


def test_an_exact_copy_of_a_state_row_the_transcript_matched_is_shown_once():
    """hermes-webui writes rows with ``_ts`` and no ``timestamp``; state.db holding its row twice must
    not show the second copy once the first has been matched against the transcript."""
    side = [U1, {"role": "assistant", "content": "first answer", "_ts": 2.0}]
    out = merge(side, [U1, A1, dict(A1)])
    assert texts(out) == ["first question", "first answer"]


def test_an_exact_copy_of_a_matched_state_row_is_dropped_after_a_new_turn_too():
    side = [U1, {"role": "assistant", "content": "first answer", "_ts": 2.0}]
    out = merge(side, [U1, A1, dict(A1), U2, A2])
    assert texts(out) == ["first question", "first answer", "second question", "second answer"]


# ----------------------------------------------------------------------------- the fast paths decide as the rules


@settings(max_examples=300, deadline=None)
@given(st.one_of(_case(), _replay_case().map(lambda c: (c[0], c[1], c[2], 0.5 if c[2] else None))))
def test_property_rows_a_new_turn_adds_are_appended_as_the_rules_would(case):
    """The one-pass append of a new turn's rows (docs/reconciliation.md, "Speed") takes only rows every
    rule but the last would leave alone."""
    from api.rules import reconcile

    side, state, w, b = case
    fast = merge([dict(m) for m in side], [dict(m) for m in state], w, b)
    original = reconcile._Merge._append_plainly_new
    reconcile._Merge._append_plainly_new = lambda self, start: 0
    try:
        slow = merge([dict(m) for m in side], [dict(m) for m in state], w, b)
    finally:
        reconcile._Merge._append_plainly_new = original
    assert fast == slow


_EDITS = ["text", "like_state", "time", "later_time", "tag", "marker", "append", "drop_last"]


@st.composite
def _turn_case(draw):
    """A conversation state.db holds whole and the transcript up to some row (the turn before)."""
    history = [draw(_row(1.0 + i)) for i in range(draw(st.integers(0, 12)))]
    for i, row in enumerate(history):
        if row["content"] and not row.get("tool_calls"):
            row["content"] += f" #{i}"
    cut = draw(st.integers(0, len(history)))
    watermark = draw(st.sampled_from([None, None, float(cut)]))
    return [dict(m) for m in history[:cut]], [dict(m) for m in history], watermark, None


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(_turn_case(), _case()),
    st.lists(st.tuples(st.sampled_from(_EDITS), st.integers(0, 50)), max_size=4),
    st.booleans(),
)
def test_property_a_transcript_asked_about_again_is_answered_as_the_first_time(case, edits, prefer_context):
    """What is kept across calls (docs/reconciliation.md, "Speed") never answers for rows that changed: the
    view of an edited or grown transcript, asked again, equals the view a first call gives."""
    from api.rules.message_keys import clear_memos

    side, state, w, b = case
    rows = [dict(m) for m in side]
    sess = session_view(messages=rows, context_messages=rows, truncation_watermark=w, truncation_boundary=b)
    reconciled_state_db_messages_for_session(sess, prefer_context=prefer_context, state_messages=state)
    for edit, at in edits:  # the next turn: rows changed in place, or more rows
        row = rows[at % len(rows)] if rows else None
        if edit == "append" or row is None:
            rows.append(u(f"new question {at}", 100.0 + at))
        elif edit == "drop_last":
            rows.pop()
        elif edit == "text":
            row["content"] = f"edited {at}"
        elif edit == "like_state" and len(state) > len(side):  # the transcript now shows a newer row
            newer = state[len(side) + at % (len(state) - len(side))]
            row.update(role=newer["role"], content=newer["content"])
        elif edit == "time":
            row["timestamp"] = float(at % 3)
        elif edit == "later_time":
            row["timestamp"] = 200.0 + at
        elif edit == "tag" and isinstance(row["content"], str):
            row["content"] = "[Workspace::v1: /w] " + row["content"]
        elif edit == "marker":
            row["content"] = "[CONTEXT COMPACTION] Earlier turns were compacted."
    first = session_view(
        messages=[dict(m) for m in rows],
        context_messages=[dict(m) for m in rows],
        truncation_watermark=w,
        truncation_boundary=b,
    )
    state_again = [dict(m) for m in state]
    again = reconciled_state_db_messages_for_session(
        sess, prefer_context=prefer_context, state_messages=[dict(m) for m in state]
    )
    clear_memos()
    expected = reconciled_state_db_messages_for_session(
        first, prefer_context=prefer_context, state_messages=state_again
    )
    assert again == expected

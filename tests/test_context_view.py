"""The context delta (docs/reconciliation.md, "The context delta"): worked examples, and agreement with a
straightforward reading of the rule on random contexts and state rows."""

from __future__ import annotations

import copy

from hypothesis import given, settings
from hypothesis import strategies as st

from api.rules.context_view import state_db_delta_after_context
from api.rules.message_keys import message_content_key, reconcile_api_content_sidecars


def u(text, ts, **extra):
    return {"role": "user", "content": text, "timestamp": ts, **extra}


def a(text, ts, **extra):
    return {"role": "assistant", "content": text, "timestamp": ts, **extra}


U1, A1, U2, A2 = (
    u("first question", 1.0),
    a("first answer", 2.0),
    u("second question", 3.0),
    a("second answer", 4.0),
)


# ----------------------------------------------------------------------------- worked examples


def test_delta_of_a_mirrored_context_is_the_newer_rows():
    assert state_db_delta_after_context([U1, A1], [U1, A1, U2, A2]) == [U2, A2]


def test_delta_ignores_timestamps_whitespace_and_workspace_tags():
    context = [u("hi  there", 100.0), a("yes", 101.0)]
    state = [u("[Workspace::v1: /w] hi there", 1.0), a("yes", 2.0), U2]
    assert state_db_delta_after_context(context, state) == [U2]


def test_delta_needs_a_run_of_two_rows_to_align():
    assert state_db_delta_after_context([U1, a("other", 9.0)], [U1, A1, U2]) == [U1, A1, U2]


def test_delta_accepts_a_single_row_run_after_a_recovered_user_row():
    context = [u("first question", 9.0, _recovered=True), a("different", 9.5)]
    assert state_db_delta_after_context(context, [U1, A1, U2]) == [A1, U2]


def test_delta_of_empty_inputs_is_the_state():
    assert state_db_delta_after_context([], [U1]) == [U1]
    assert state_db_delta_after_context([U1], []) == []


def test_delta_finds_the_state_start_inside_a_longer_context():
    context = [u("old", 0.1), a("old answer", 0.2), U1, A1]
    assert state_db_delta_after_context(context, [U1, A1, U2, A2]) == [U2, A2]


def test_delta_restarts_the_context_cursor_at_the_run_length_not_the_offset():
    context = [u("old", 0.1), a("old answer", 0.2), U1, A1]
    again = [u("first question", 5.0), a("first answer", 6.0)]
    # as in hermes-webui: the walk resumes at context[2], so the repeated pair consumes it again
    assert state_db_delta_after_context(context, [U1, A1, *again, U2]) == [U2]


def test_delta_walks_past_interleaved_state_rows_until_the_context_is_consumed():
    context = [U1, A1, U2, A2]
    state = [U1, A1, u("interleaved", 2.5), U2, A2, a("new", 9.0)]
    assert state_db_delta_after_context(context, state) == [a("new", 9.0)]


# ----------------------------------------------------------------------------- against a reference


def reference_delta(context, state):
    """The rule as docs/reconciliation.md states it, one content key at a time."""
    if not context or not state:
        return list(state)
    reconcile_api_content_sidecars(context, state)
    local = [message_content_key(m) for m in context]
    theirs = [message_content_key(m, state_side=True) for m in state]
    best, best_offset = 0, 0
    for offset in range(len(context)):
        run = 0
        while run < min(len(context) - offset, len(state)) and theirs[run] == local[offset + run]:
            run += 1
        if run > best:
            best, best_offset = run, offset
    first = context[0]
    recovered = isinstance(first, dict) and first.get("role") == "user" and bool(first.get("_recovered"))
    if best < 2 and not (best == 1 and best_offset == 0 and recovered):
        return list(state)
    cursor = best
    if cursor >= len(context):
        return state[best:]
    for i in range(best, len(state)):
        if theirs[i] == local[cursor]:
            cursor += 1
            if cursor >= len(context):
                return state[i + 1 :]
    return state[best:]


_WORDS = st.sampled_from(["alpha", "beta", "gamma", "x", ""])


@st.composite
def _conversation_row(draw, i):
    role = draw(st.sampled_from(["user", "assistant", "assistant", "tool"]))
    row = {"role": role, "content": f"{draw(_WORDS)} {i % 7}", "timestamp": float(i)}
    if role == "tool":
        row["tool_call_id"] = draw(st.sampled_from(["call_a", "call_b"]))
        row[draw(st.sampled_from(["name", "tool_name"]))] = "terminal"
    if role == "assistant" and draw(st.integers(0, 5)) == 0:
        row["tool_calls"] = [
            {"id": "call_a", "type": "function", "function": {"name": "t", "arguments": "{}"}}
        ]
    return row


_CHANGES = ["tag", "api", "extra", "list", "spaces", "text", "none", "recovered", "not_a_dict"]


@st.composite
def _delta_case(draw):
    """A conversation; the context is a stretch of it and state.db holds another, both with the differences
    a file and state.db show (workspace tags, api_content, fields of their own, text parts, whitespace)."""
    size = draw(st.integers(0, 40))
    rows = [draw(_conversation_row(i)) for i in range(size)]
    for row in rows:  # a tag both copies carry: equal rows whose content keys differ
        if row["role"] == "user" and draw(st.integers(0, 2)) == 0:
            row["content"] = "[Workspace::v1: /w] " + row["content"]
    start = draw(st.integers(0, size))
    context = [dict(m) for m in rows[start : draw(st.integers(start, size))]]
    state = [dict(m) for m in rows[draw(st.integers(0, size)) :]]
    for side in (context, state):
        for _ in range(draw(st.integers(0, 3))):
            if not side:
                break
            i = draw(st.integers(0, len(side) - 1))
            change, row = draw(st.sampled_from(_CHANGES)), side[i]
            if not isinstance(row, dict):
                continue
            if change == "tag":
                row["content"] = "[Workspace::v1: /w]\n" + str(row["content"])
            elif change == "api":
                row["api_content"] = draw(st.sampled_from(["api one", "api two"]))
            elif change == "extra":
                row[draw(st.sampled_from(["_ts", "reasoning", "_turnDuration"]))] = 1.0
            elif change == "list":
                row["content"] = [{"type": "text", "text": str(row["content"])}]
            elif change == "spaces":
                row["content"] = "  " + str(row["content"]) + "\n"
            elif change == "text":
                row["content"] = "changed"
            elif change == "none":
                row["content"] = None
            elif change == "recovered":
                row["_recovered"] = True
            else:
                side[i] = "not a row"
    if draw(st.integers(0, 3)) == 0:  # every context row has a field state.db lacks: the column-wise path
        for row in context:
            if isinstance(row, dict):
                row["_ts"] = row["timestamp"]
    return context, state


@settings(max_examples=400, deadline=None)
@given(_delta_case())
def test_property_delta_agrees_with_a_reference_reading_of_the_rule(case):
    context, state = case
    expected = reference_delta(copy.deepcopy(context), copy.deepcopy(state))
    assert state_db_delta_after_context(copy.deepcopy(context), copy.deepcopy(state)) == expected

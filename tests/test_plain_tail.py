"""The rows a new turn adds: the shortcut of the reconciled model context decides as the rules do
(docs/reconciliation.md, "Speed")."""

from __future__ import annotations

import types

from hypothesis import given, settings
from hypothesis import strategies as st

import api.rules.reconcile
from api.rules.message_keys import clear_memos
from api.rules.plain_tail import context_tail
from api.rules.reconcile import reconciled_view

CALL_A = [{"id": "call_a", "type": "function", "function": {"name": "terminal", "arguments": "{}"}}]
CALL_B = [{"id": "call_b", "type": "function", "function": {"name": "terminal", "arguments": "{}"}}]


def u(text, ts, **extra):
    return {"role": "user", "content": text, "timestamp": ts, **extra}


def a(text, ts, **extra):
    return {"role": "assistant", "content": text, "timestamp": ts, **extra}


def tool(text, ts, **extra):
    return {
        "role": "tool",
        "content": text,
        "tool_call_id": "call_a",
        "name": "terminal",
        "timestamp": ts,
        **extra,
    }


def session(context, **fields):
    base = dict(
        session_id="s1",
        messages=list(context),
        context_messages=context,
        truncation_watermark=None,
        truncation_boundary=None,
        compression_anchor_message_key=None,
        is_cli_session=False,
        read_only=False,
    )
    base.update(fields)
    return types.SimpleNamespace(**base)


def stored(row):
    """The row as state.db gives it back: a tool row names its tool twice."""
    out = dict(row)
    if out["role"] == "tool":
        out["tool_name"] = out["name"]
    return out


CONTEXT = [
    u("list the files", 1.0),
    a("", 2.0, tool_calls=CALL_A),
    tool("a.py b.py", 3.0),
    a("Two files.", 4.0),
]
TURN = [u("and the tests?", 10.0), a("None yet.", 11.0)]


def test_a_new_turn_after_the_context_is_the_tail():
    state = [stored(m) for m in CONTEXT] + TURN
    assert context_tail(CONTEXT, state) == TURN
    assert reconciled_view(session(CONTEXT), state, prefer_context=True) == CONTEXT + TURN


def test_state_that_holds_only_the_context_adds_nothing():
    assert context_tail(CONTEXT, [stored(m) for m in CONTEXT]) == []


def test_rows_the_rules_must_judge_are_left_to_them():
    head = [stored(m) for m in CONTEXT]
    tagged = [u("[Workspace::v1: /w] list the files", 1.0), *CONTEXT[1:]]
    assert context_tail(tagged, [stored(m) for m in tagged] + TURN) is None  # the agent's tag
    assert context_tail(CONTEXT, head + [a("Two files, again.", 12.0, api_content="x")]) is None
    assert context_tail(CONTEXT, head + [u("older", 3.5)]) is None  # not newer than the context
    assert context_tail(CONTEXT, head + [a("Two files.", 12.0)]) is None  # a visible duplicate
    assert context_tail(CONTEXT, head + [a("files", 12.0)]) is None  # fuzzily like a context row
    assert context_tail(CONTEXT, head + [a("new", 12.0, id="m1")]) is None  # an identity
    assert context_tail(CONTEXT, [head[0], dict(head[1], content="other"), *head[2:], *TURN]) is None
    assert context_tail(CONTEXT[:1], head[:1] + TURN) is None  # one row: aligned only by the rules
    marker = [u("[CONTEXT COMPACTION] earlier turns", 1.0), *CONTEXT[1:]]
    assert context_tail(marker, [stored(m) for m in marker] + TURN) is None


# ----------------------------------------------------------------------------- the shortcut decides as the rules

_TEXTS = ["list the files", "files", "Two files.", "and the tests?", "None yet.", "", "a.py b.py"]


@st.composite
def _row(draw, ts):
    role = draw(st.sampled_from(["user", "assistant", "assistant", "tool"]))
    row = {"role": role, "content": draw(st.sampled_from(_TEXTS)), "timestamp": ts}
    if role == "assistant" and draw(st.booleans()):
        row["tool_calls"] = draw(st.sampled_from([CALL_A, CALL_B]))
    if role == "tool":
        row["tool_call_id"] = draw(st.sampled_from(["call_a", "call_b"]))
        row["name"] = "terminal"
    return row


_CHANGES = ["tag", "api", "display", "spaces", "list", "text", "id", "time", "marker", "screenshot"]


def _change(row, change):
    if change == "tag":
        row["content"] = "[Workspace::v1: /w] " + str(row["content"])
    elif change == "api":
        row["api_content"] = "api " + str(row["content"])
    elif change == "display":
        row["_turnDuration"] = 1.5
    elif change == "spaces":
        row["content"] = " " + str(row["content"]) + "\n"
    elif change == "list":
        row["content"] = [{"type": "text", "text": str(row["content"])}]
    elif change == "text":
        row["content"] = "changed"
    elif change == "id":
        row["id"] = "m1"
    elif change == "time":
        row["timestamp"] = 2.5
    elif change == "marker":
        row["content"] = "[CONTEXT COMPACTION] earlier turns"
    elif change == "screenshot" and row["role"] == "user":
        row["content"] = [{"type": "text", "text": "look"}, {"type": "image_url", "image_url": {"url": "x"}}]


@st.composite
def _view_case(draw):
    """A context, state.db holding it (each row maybe stored a little differently) and then a turn's rows
    (newer, older, repeated or alike texts), and the session fields that steer the view."""
    history = [draw(_row(1.0 + i)) for i in range(draw(st.integers(0, 8)))]
    if history and draw(st.booleans()):  # an interrupted turn
        history += [a("partial", 9.0, _partial=True), a("interrupted", 9.5, _error=True)]
    context = [dict(m) for m in history]
    state = [stored(m) for m in history]
    for side, at, change in draw(
        st.lists(st.tuples(st.booleans(), st.integers(0, 20), st.sampled_from(_CHANGES)), max_size=2)
    ):
        rows = context if side else state
        if rows:
            _change(rows[at % len(rows)], change)
    tail = [
        draw(_row(draw(st.sampled_from([0.5, 4.0, 20.0, 21.0, 22.0]))))
        for _ in range(draw(st.integers(0, 3)))
    ]
    for i, row in enumerate(tail):
        if row["content"] and draw(st.booleans()):
            row["content"] = f"new words {i}"
    for at, change in draw(st.lists(st.tuples(st.integers(0, 20), st.sampled_from(_CHANGES)), max_size=1)):
        if tail:
            _change(tail[at % len(tail)], change)
    if tail and draw(st.booleans()):  # state.db holding a row twice
        tail.append(dict(tail[draw(st.integers(0, len(tail) - 1))]))
    fields = dict(
        truncation_watermark=draw(st.sampled_from([None, None, None, 2.0])),
        is_cli_session=draw(st.sampled_from([False, False, True])),
    )
    return context, state + tail, fields


@settings(max_examples=500, deadline=None)
@given(_view_case())
def test_property_the_shortcut_answers_what_the_rules_answer(case):
    context, state, fields = case
    shortcut = reconciled_view(
        session([dict(m) for m in context], **fields), [dict(m) for m in state], prefer_context=True
    )
    clear_memos()
    original = api.rules.reconcile.context_tail
    api.rules.reconcile.context_tail = lambda context, state: None
    try:
        rules = reconciled_view(
            session([dict(m) for m in context], **fields), [dict(m) for m in state], prefer_context=True
        )
    finally:
        api.rules.reconcile.context_tail = original
    assert shortcut == rules

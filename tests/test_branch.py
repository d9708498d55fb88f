"""Branching: a new durable session with the history up to a message, linked to its parent."""

from __future__ import annotations

import pytest

from api.models import SESSIONS, Session
from api.rules.errors import BadRequest, Conflict, NotFound
from api.services import branch, session_catalogue, session_views
from talaria_testing import scripted_turns
from talaria_testing.transcripts import conversation, message_row


@pytest.fixture
def parent(state_dir):
    msgs = conversation("u1", "a1", "u2", "a2")
    msgs[-1]["_partial"] = True
    s = Session(session_id="parent", messages=msgs, context_messages=msgs[:1], title="Trip plans", model="m1")
    s.save()
    return s


def test_a_branch_holds_the_history_up_to_the_message_and_names_its_parent(parent):
    payload = branch.branch_session("parent", 3)
    child_id = payload["session_id"]
    assert child_id != "parent" and payload["parent_session_id"] == "parent"
    assert payload["title"] == "Trip plans (branch)"
    SESSIONS.clear()
    child = Session.load(child_id)  # durable: read back from its own file
    assert [m["content"] for m in child.messages] == ["u1", "a1", "u2"]
    assert child.context_messages == [] and child.model == "m1"
    assert child.parent_session_id == "parent"
    # The parent is unchanged, and the sidebar row of the branch names its parent.
    assert [m["content"] for m in Session.load("parent").messages] == ["u1", "a1", "u2", "a2"]
    rows = {row["session_id"]: row for row in session_views.list_sessions()["sessions"]}
    assert rows[child_id]["parent_session_id"] == "parent"


def test_live_turn_flags_are_not_carried_into_the_branch(parent):
    payload = branch.branch_session("parent", 4)
    assert all("_partial" not in m for m in Session.load(payload["session_id"]).messages)


@pytest.mark.parametrize("keep", [-1, 5, "2", True, None, 2.5])
def test_a_bad_count_is_a_400_and_creates_nothing(parent, keep):
    before = {row["session_id"] for row in session_views.list_sessions()["sessions"]}
    with pytest.raises(BadRequest):
        branch.branch_session("parent", keep)
    assert {row["session_id"] for row in session_views.list_sessions()["sessions"]} == before


def test_a_missing_session_is_a_404(state_dir):
    with pytest.raises(NotFound):
        branch.branch_session("nope", 1)


def test_a_streaming_session_cannot_branch(parent):
    with scripted_turns.live_turn(parent), pytest.raises(Conflict):
        branch.branch_session("parent", 1)


def test_a_long_title_stays_within_the_limit(state_dir):
    Session(session_id="long", messages=[message_row("user", "x", 1.0)], title="t" * 200).save()
    title = branch.branch_session("long", 1)["title"]
    assert len(title) <= session_catalogue.TITLE_MAX and title.endswith("(branch)")


def test_a_branch_before_the_first_message_is_an_empty_linked_session(parent):
    payload = branch.branch_session("parent", 0)
    assert payload["messages"] == [] and payload["parent_session_id"] == "parent"

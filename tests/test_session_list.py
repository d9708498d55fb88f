"""The sidebar list: projected rows, newest first, cursor pages with the pinned rows on the first."""

from __future__ import annotations

import json
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from api.rules.errors import BadRequest
from api.services import session_catalogue, session_list
from api.store import models
from api.store.models import Session
from talaria_testing.scripted_turns import live_turn
from talaria_testing.sidebar_cost import bytes_allocated, index_many_sessions, touch_row
from talaria_testing.stores import store_on


def _saved(title: str, updated_at: float, **kw) -> Session:
    session = Session(title=title, updated_at=updated_at, **kw)
    session.save(touch_updated_at=False)
    return session


def _page(limit: int | None = None, cursor: str | None = None) -> dict:
    return json.loads(b"".join(session_list.page_json(limit, cursor, {})))


def test_rows_carry_only_the_sidebar_fields(state_dir):
    _saved("one", 100.0, composer_draft="a long draft", pending_user_message=None)
    (row,) = _page()["sessions"]
    assert set(row) == set(session_list.SIDEBAR_FIELDS)
    assert row["title"] == "one" and row["message_count"] == 0 and row["is_streaming"] is False


def test_rows_carry_the_model_with_its_provider_so_another_tab_can_show_the_pick(state_dir):
    """A model picked in one tab reached another tab's header through the feed without its provider, so the
    picker there could not tell which listed model it was."""
    _saved("one", 100.0, model="qwen", model_provider="Custom:Local")
    (row,) = _page()["sessions"]
    assert (row["model"], row["model_provider"]) == ("qwen", "custom:local")


def test_a_row_names_the_turn_live_in_its_session_so_another_tab_can_follow_it(state_dir):
    """A tab open on a session never showed a turn started in another tab: the feed's row said only
    ``is_streaming``, not which stream to follow."""
    session = _saved("one", 100.0, messages=[{"role": "user", "content": "hi", "timestamp": 1.0}])
    with live_turn(session) as turn:
        session.save()
        (row,) = _page()["sessions"]
        assert row["active_stream_id"] == turn.stream_id and row["is_streaming"] is True
    session.active_stream_id = None
    session.save()
    (row,) = _page()["sessions"]
    assert row["active_stream_id"] is None and row["is_streaming"] is False


def test_a_row_counts_the_messages_a_person_sees_not_the_tool_rows(state_dir):
    """The sidebar said "5 messages" for one question and one answer that ran a tool."""
    call = {"id": "c1", "function": {"name": "terminal", "arguments": "{}"}}
    rows = [
        {"role": "user", "content": "do it", "timestamp": 1.0},
        {"role": "assistant", "content": "", "tool_calls": [call], "timestamp": 2.0},
        {"role": "tool", "tool_call_id": "c1", "content": "{}", "timestamp": 3.0},
        {"role": "assistant", "content": "Done.", "timestamp": 4.0},
    ]
    _saved("one", 100.0, messages=rows)
    (row,) = _page()["sessions"]
    assert row["visible_message_count"] == 2 and row["message_count"] == 4


def test_pages_walk_every_row_once_newest_first_with_ties_broken_by_id(state_dir):
    saved = [_saved(f"s{i}", 1000.0 + i // 3) for i in range(20)]  # groups of three share updated_at
    expected = [s.session_id for s in sorted(saved, key=lambda s: (s.updated_at, s.session_id), reverse=True)]
    seen, cursor = [], None
    while True:
        data = _page(6, cursor)
        seen += [r["session_id"] for r in data["sessions"]]
        assert data["total"] == 20
        cursor = data["next_cursor"]
        if cursor is None:
            break
    assert seen == expected


def test_pinned_rows_are_always_on_the_first_page_and_never_on_later_ones(state_dir):
    old_pinned = _saved("old pinned", 1.0, pinned=True)
    for i in range(10):
        _saved(f"s{i}", 100.0 + i)
    first = _page(3)
    titles = [r["title"] for r in first["sessions"]]
    assert titles == ["old pinned", "s9", "s8", "s7"]
    rest = _page(100, first["next_cursor"])
    assert old_pinned.session_id not in [r["session_id"] for r in rest["sessions"]]
    assert len(rest["sessions"]) == 7 and rest["next_cursor"] is None


def test_a_page_follows_changes_to_the_index(state_dir):
    one = _saved("one", 100.0)
    assert [r["title"] for r in _page()["sessions"]] == ["one"]
    one.title = "renamed"
    one.save()
    _saved("two", 50.0)
    assert [r["title"] for r in _page()["sessions"]] == ["renamed", "two"]


@pytest.mark.parametrize("cursor", ["!!!", "bm9waXBl", "", "x" * 500])
def test_a_malformed_cursor_is_400(state_dir, cursor):
    with pytest.raises(BadRequest):
        session_list.page(10, cursor or "A")


@pytest.mark.parametrize("limit", [0, session_list.MAX_LIMIT + 1])
def test_a_limit_out_of_range_is_400(state_dir, limit):
    with pytest.raises(BadRequest):
        session_list.page(limit, None)


# ---------------------------------------------------------------------- cost by what is asked


def test_a_page_after_a_change_costs_the_page_not_every_session_stored(state_dir):
    """Every checkpoint of a streaming turn invalidated a snapshot of the whole list, so the next page copied,
    serialised and sorted all the rows again (78% of the sidebar's time with 2,000 sessions and 16 turns
    streaming). The order is now kept as rows change: a page allocates what it sends."""
    sids = index_many_sessions(state_dir, 3000, pinned_every=1000)
    _page(20)
    touch_row(state_dir, sids[5])
    allocated = bytes_allocated(lambda: session_list.page_json(20, None, {}))
    assert allocated < 200_000  # copying the 3,000 rows alone takes megabytes
    data = _page(20)
    assert [r["session_id"] for r in data["sessions"][:4]] == [sids[2000], sids[1000], sids[0], sids[5]]
    assert data["total"] == 3000


PINNED_OR_NOT = st.booleans()
OPERATIONS = st.lists(
    st.one_of(
        st.tuples(st.just("create"), st.sampled_from([None, 100.0, 200.0]), PINNED_OR_NOT),
        st.tuples(st.just("save"), st.integers(0, 7), st.sampled_from([None, 100.0, 300.0])),
        st.tuples(st.just("rename"), st.integers(0, 7), st.text("ab ", min_size=1, max_size=3)),
        st.tuples(st.just("pin"), st.integers(0, 7), PINNED_OR_NOT),
        st.tuples(st.just("archive"), st.integers(0, 7), PINNED_OR_NOT),
        st.tuples(st.just("delete"), st.integers(0, 7), st.none()),
    ),
    max_size=14,
)


def _apply(operation: tuple, live: list[str]) -> None:
    kind, which, value = operation
    if kind == "create":
        session = Session(title="new", pinned=value)
        if which is None:
            session.save()
        else:
            session.updated_at = which
            session.save(touch_updated_at=False)
        live.append(session.session_id)
        return
    if not live:
        return
    sid = live[which % len(live)]
    if kind == "save":
        session = models.get_session(sid)
        session.messages.append({"role": "user", "content": "more", "timestamp": time.time()})
        if value is None:
            session.save()
        else:
            session.updated_at = value
            session.save(touch_updated_at=False)
    elif kind == "rename":
        session_catalogue.rename_session(sid, value)
    elif kind in ("pin", "archive"):
        session_catalogue.set_flag(sid, {"pin": "pinned", "archive": "archived"}[kind], value)
    else:
        session_catalogue.delete_session(sid)
        live.remove(sid)


def _sorted_from_the_files(folder) -> list[dict]:
    rows = [
        Session.load(path.stem).compact() for path in folder.glob("*.json") if not path.name.startswith("_")
    ]
    rows.sort(key=lambda r: (bool(r["pinned"]), r["updated_at"], r["session_id"]), reverse=True)
    return [session_list.sidebar_row(r) for r in rows]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(operations=OPERATIONS, limit=st.integers(1, 4))
def test_after_any_changes_the_pages_equal_a_sort_from_scratch_of_the_files(tmp_path, operations, limit):
    folder = tmp_path / f"example-{len(list(tmp_path.iterdir()))}" / "sessions"
    folder.mkdir(parents=True)
    with store_on(folder):
        live: list[str] = []
        for operation in operations:
            _apply(operation, live)
        expected = _sorted_from_the_files(folder)
        first = _page(limit)
        walked, cursor = first["sessions"], first["next_cursor"]
        while cursor is not None:
            later = _page(limit, cursor)
            walked, cursor = walked + later["sessions"], later["next_cursor"]
        assert walked == expected
        assert first["total"] == len(expected) == len(live)
        assert _page()["sessions"] == expected

"""Three-way merge of a session payload: only-one-side changes combine, appends commute, the rest conflict."""

from __future__ import annotations

import pytest

from api.rules.session_merge import MergeConflict, changed_since, merge, snapshot

U1, A1, U2, T2 = (
    {"role": r, "content": c}
    for r, c in [("user", "u1"), ("assistant", "a1"), ("user", "u2"), ("user", "t2")]
)


def _base() -> dict:
    return {"title": "T", "pinned": False, "updated_at": 1.0, "messages": [U1, A1], "context_messages": [U1]}


def test_a_field_only_one_side_changed_takes_that_side():
    base = snapshot(_base())
    ours = dict(_base(), pinned=True)
    theirs = dict(_base(), title="Theirs")
    assert merge(base, ours, theirs) == dict(_base(), pinned=True, title="Theirs")


def test_lists_both_sides_appended_to_keep_both_appends_theirs_first():
    base = snapshot(_base())
    ours = dict(_base(), messages=[U1, A1, U2], updated_at=3.0)
    theirs = dict(_base(), messages=[U1, A1, T2], updated_at=2.0)
    merged = merge(base, ours, theirs)
    assert merged["messages"] == [U1, A1, T2, U2] and merged["updated_at"] == 3.0


def test_an_in_place_append_after_the_snapshot_counts_as_our_change():
    live = _base()
    base = snapshot(live)
    live["messages"].append(U2)
    assert merge(base, live, _base())["messages"] == [U1, A1, U2]


def test_a_talaria_field_the_other_writer_dropped_is_unchanged_not_emptied():
    base = snapshot(_base())
    theirs = {k: v for k, v in _base().items() if k != "context_messages"}
    merged = merge(base, _base(), theirs, absent_means_unchanged=("context_messages",))
    assert merged["context_messages"] == [U1]


@pytest.mark.parametrize(
    ("ours", "theirs"),
    [
        ({"title": "A"}, {"title": "B"}),
        ({"messages": [U1]}, {"messages": [U1, A1, T2]}),
        ({"pinned": True}, {"pinned": 1}),
    ],
)
def test_different_changes_to_one_field_conflict(ours, theirs):
    with pytest.raises(MergeConflict):
        merge(snapshot(_base()), dict(_base(), **ours), dict(_base(), **theirs))


def test_a_title_a_person_chose_beats_one_made_up_from_the_first_message():
    base = snapshot(dict(_base(), title="Untitled", manual_title=False))
    ours = dict(_base(), title="hello there", manual_title=False)  # the turn's automatic title
    theirs = dict(_base(), title="Renamed elsewhere", manual_title=True)
    merged = merge(base, ours, theirs)
    assert (merged["title"], merged["manual_title"]) == ("Renamed elsewhere", True)
    merged = merge(base, theirs, ours)
    assert (merged["title"], merged["manual_title"]) == ("Renamed elsewhere", True)


@pytest.mark.parametrize(
    "change",
    [
        lambda p: p["messages"].append(U2),
        lambda p: p["context_messages"].clear(),
        lambda p: p.update(title="Renamed"),
        lambda p: p.update(pinned=0),
        lambda p: p.update(extra_key=1),
        lambda p: p.pop("pinned"),
    ],
)
def test_a_changed_field_list_or_key_is_a_change_since_the_snapshot(change):
    payload = _base()
    base = snapshot(payload)
    assert not changed_since(base, payload)
    change(payload)
    assert changed_since(base, payload)

"""The sidebar order kept one change at a time equals the order sorted from scratch, page by page."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from api.rules.sidebar_order import SidebarOrder

SIDS = st.sampled_from([f"s{i}" for i in range(12)])
TIMES = st.one_of(
    st.sampled_from([0, 1.0, 1.5, 2.0, None, "3.5", "junk", float("nan"), float("inf")]),
    st.floats(min_value=0, max_value=1e10, allow_nan=False),
)
OPERATIONS = st.lists(
    st.one_of(
        st.tuples(st.just("put"), SIDS, TIMES, st.booleans()),
        st.tuples(st.just("remove"), SIDS, st.none(), st.none()),
    ),
    max_size=60,
)


def _time(value) -> float:
    try:
        number = float(value or 0)
    except (TypeError, ValueError):
        return 0.0
    return 0.0 if number != number else number


def _from_scratch(rows: dict[str, dict]) -> list[str]:
    """Pinned rows first, then the others; each newest first, ties by id (descending)."""
    return [
        sid
        for sid, _ in sorted(
            rows.items(),
            key=lambda item: (bool(item[1]["pinned"]), _time(item[1]["updated_at"]), item[0]),
            reverse=True,
        )
    ]


def _walk(order: SidebarOrder, limit: int, project: str | None = None) -> list[str]:
    first = order.page(None, limit, project)
    seen = [e.row["session_id"] for e in first.pinned + first.rows]
    key = first.next_key
    while key is not None:
        later = order.page(key, limit, project)
        assert not later.pinned
        seen += [e.row["session_id"] for e in later.rows]
        key = later.next_key
    return seen


@settings(max_examples=300)
@given(OPERATIONS, st.integers(min_value=1, max_value=5))
def test_any_sequence_of_changes_leaves_the_order_and_pages_of_a_sort_from_scratch(operations, limit):
    order, truth = SidebarOrder(), {}
    for op, sid, updated, pinned in operations:
        if op == "put":
            row = {"session_id": sid, "updated_at": updated, "pinned": pinned}
            order.put(sid, row)
            truth[sid] = row
        else:
            order.remove(sid)
            truth.pop(sid, None)
    expected = _from_scratch(truth)
    assert _walk(order, limit) == expected
    everything = order.page(None, None)
    assert [e.row["session_id"] for e in everything.pinned + everything.rows] == expected
    assert len(order) == order.page(None, limit).total == len(truth)
    newest = sorted(truth, key=lambda sid: (_time(truth[sid]["updated_at"]), sid), reverse=True)
    assert [row["session_id"] for row in order.newest_first()] == newest
    assert _walk(SidebarOrder(truth), limit) == expected  # built at once, as at startup


PROJECTS = st.sampled_from([None, "", "p1", "p2", 7])
PROJECT_OPERATIONS = st.lists(
    st.one_of(
        st.tuples(st.just("put"), SIDS, TIMES, st.booleans(), PROJECTS),
        st.tuples(st.just("remove"), SIDS, st.none(), st.none(), st.none()),
    ),
    max_size=60,
)


@settings(max_examples=300)
@given(PROJECT_OPERATIONS, st.integers(min_value=1, max_value=5))
def test_a_projects_pages_are_the_sort_from_scratch_of_its_rows_after_any_changes(operations, limit):
    order, truth = SidebarOrder(), {}
    for op, sid, updated, pinned, project in operations:
        if op == "put":
            row = {"session_id": sid, "updated_at": updated, "pinned": pinned, "project_id": project}
            order.put(sid, row)
            truth[sid] = row
        else:
            order.remove(sid)
            truth.pop(sid, None)
    for project in ("p1", "p2"):
        mine = {sid: row for sid, row in truth.items() if row["project_id"] == project}
        assert _walk(order, limit, project) == _from_scratch(mine)
        assert order.page(None, limit, project).total == len(mine)
        newest = sorted(mine, key=lambda sid: (_time(mine[sid]["updated_at"]), sid), reverse=True)
        assert order.in_project(project) == newest
        assert _walk(SidebarOrder(truth), limit, project) == _from_scratch(mine)
    assert _walk(order, limit) == _from_scratch(truth)  # the whole list holds every project's rows
    assert order.page(None, limit, "nosuch").total == 0


def test_a_changed_row_is_a_new_entry_so_nothing_derived_from_the_old_one_survives():
    order = SidebarOrder()
    order.put("a", {"session_id": "a", "updated_at": 1.0, "title": "old"})
    (entry,) = order.page(None, None).rows
    entry.derived = b"old"
    order.put("a", {"session_id": "a", "updated_at": 1.0, "title": "new"})
    (again,) = order.page(None, None).rows
    assert again.derived is None and again.row["title"] == "new"


def test_a_walk_of_every_row_skips_rows_removed_meanwhile():
    order = SidebarOrder({sid: {"session_id": sid, "updated_at": float(n)} for n, sid in enumerate("abc")})
    walk = order.newest_first()
    order.remove("b")
    assert [row["session_id"] for row in walk] == ["c", "a"]

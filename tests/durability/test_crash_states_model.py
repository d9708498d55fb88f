"""The crash-state generator and the promise checks themselves: they find the failures they exist to find."""

from __future__ import annotations

import os
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from api.services.session_recovery import recover_all_sessions_on_startup
from talaria_testing import promises
from talaria_testing.crash_states import Stats, crash_states, data_variants, materialise
from talaria_testing.fsrecorder import FsRecorder, Op, replay
from talaria_testing.scenarios import (
    BY_NAME,
    DELETE,
    DELIBERATE,
    GROW,
    SID,
    build_template,
    files_under,
    record,
)


def _recorder(tmp_path: Path, files: dict[str, bytes]) -> FsRecorder:
    for rel, data in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes(data)
    return FsRecorder(tmp_path)


def _atomic_write(rec: FsRecorder, name: str, data: bytes, *, fsync_file=True, fsync_dir=True) -> None:
    """Drive the recorder's wrappers the way ``api.store.atomic.write_bytes_durable`` does."""
    tmp = os.path.join(rec.root, name + ".tmp")
    with rec:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.write(fd, data)
        if fsync_file:
            os.fsync(fd)
        os.close(fd)
        os.replace(tmp, os.path.join(rec.root, name))
        if fsync_dir:
            dfd = os.open(rec.root, os.O_RDONLY)
            os.fsync(dfd)
            os.close(dfd)


def _live_contents(rec: FsRecorder, name: str = "f") -> tuple[set[bytes | None], set[bytes | None]]:
    """(contents of ``name`` at any crash point, contents after the last operation)."""
    anywhere, at_end = set(), set()
    for state in crash_states(rec):
        anywhere.add(state.files.get(name))
        if state.point == len(rec.log):
            at_end.add(state.files.get(name))
    return anywhere, at_end


@settings(max_examples=40, deadline=None)
@given(old=st.binary(min_size=1, max_size=64), new=st.binary(min_size=1, max_size=64))
def test_a_durable_atomic_write_leaves_only_the_old_or_the_new_bytes(tmp_path_factory, old, new):
    rec = _recorder(tmp_path_factory.mktemp("atomic"), {"f": old})
    _atomic_write(rec, "f", new)
    anywhere, at_end = _live_contents(rec)
    assert anywhere <= {old, new}
    assert at_end == {new}


def test_a_rename_before_fsync_can_leave_an_empty_or_zeroed_file(tmp_path):
    rec = _recorder(tmp_path, {"f": b"old contents"})
    _atomic_write(rec, "f", b"new contents!", fsync_file=False)
    anywhere, at_end = _live_contents(rec)
    assert b"" in at_end and b"\0" * 13 in at_end and b"new c" + b"o" in {x[:6] for x in at_end if x}


def test_without_a_folder_fsync_the_rename_may_be_lost_after_return(tmp_path):
    rec = _recorder(tmp_path, {"f": b"old"})
    _atomic_write(rec, "f", b"new", fsync_dir=False)
    _anywhere, at_end = _live_contents(rec)
    assert at_end == {b"old", b"new"}


def test_pending_renames_in_one_folder_may_land_in_any_order(tmp_path):
    rec = _recorder(tmp_path, {})
    with rec:
        for name, data in (("a", b"1"), ("b", b"2")):
            fd = os.open(os.path.join(rec.root, name), os.O_WRONLY | os.O_CREAT, 0o644)
            os.write(fd, data)
            os.fsync(fd)
            os.close(fd)
        os.replace(os.path.join(rec.root, "a"), os.path.join(rec.root, "x"))
        os.replace(os.path.join(rec.root, "b"), os.path.join(rec.root, "x"))
    finals = {state.files.get("x") for state in crash_states(rec) if state.point == len(rec.log)}
    assert finals == {None, b"1", b"2"}  # b's rename may persist before a's: x ends up as 1


def test_impossible_orders_are_dropped_and_counted(tmp_path):
    rec = _recorder(tmp_path, {})
    rec.log = [
        Op("create", "t", ino=7),
        Op("write", ino=7, data=b"x"),
        Op("fsync", ino=7),
        Op("rename", "t", "f", ino=7),
    ]
    stats = Stats()
    states = list(crash_states(rec, stats))
    assert stats.impossible_orders > 0  # the rename without its create
    assert all(set(s.files) <= {"t", "f"} for s in states)


def test_data_variants_cover_lost_partial_and_zero_filled_appends():
    assert data_variants(b"ab", b"abcdef") == [b"ab", b"abcdef", b"abcd", b"ab\0\0\0\0"]
    assert data_variants(b"same", b"same") == [b"same"]


def test_replay_rebuilds_a_recorded_save_exactly(tmp_path):
    scenario = BY_NAME["save_shrink_loss"]
    template = tmp_path / "t"
    rec, final = record(scenario, template, tmp_path / "r", build_template(scenario, template, 8))
    assert replay(rec)[1] == final
    sequence = [
        (op.kind, op.dst) for op in rec.log if op.kind in ("rename", "fsync_dir") and "_index" not in op.dst
    ]
    live = promises.live_rel()
    assert sequence[:4] == [("rename", live + ".bak"), ("fsync_dir", ""), ("rename", live), ("fsync_dir", "")]


def test_the_checker_flags_a_recorded_save_whose_fsyncs_are_removed(tmp_path):
    """Mutation: the same save without its file fsyncs must produce states that break promise 1."""
    scenario = BY_NAME["save_grow"]
    template = tmp_path / "t"
    rec, final = record(scenario, template, tmp_path / "r", build_template(scenario, template, 8))
    rec.log = [op for op in rec.log if op.kind != "fsync"]
    exp = promises.Expectation(scenario.name, scenario.kind, files_under(template), final)
    found = []
    for k, state in enumerate(crash_states(rec)):
        dest = tmp_path / f"s{k}"
        materialise(state, dest)
        recover_all_sessions_on_startup(dest / "sessions", rebuild_index=True)
        found += promises.check(exp, state.files, files_under(dest), acknowledged=state.point == len(rec.log))
    assert any(v.startswith("P1") for v in found)


# ---------------------------------------------------------------------- the promise checks on hand-made states


def _doc(messages, **fields) -> bytes:
    return promises.orjson.dumps({"session_id": SID, "title": "T", "messages": messages, **fields})


MSGS = [
    {"role": "user" if i % 2 == 0 else "assistant", "content": f"m{i}", "timestamp": 10.0 + i}
    for i in range(6)
]


def _exp(kind, old_msgs, new_msgs, **new_fields) -> promises.Expectation:
    return promises.Expectation(
        "hand",
        kind,
        {promises.live_rel(): _doc(old_msgs)},
        {promises.live_rel(): _doc(new_msgs, **new_fields)},
    )


def test_check_flags_a_torn_file_a_destroyed_file_and_a_changed_transcript():
    exp = _exp(GROW, MSGS[:4], MSGS)
    torn = {promises.live_rel(): b'{"messages": [{"ro'}
    assert any(v.startswith("P1") for v in promises.check(exp, torn, torn, acknowledged=False))
    pre = {promises.live_rel(): _doc(MSGS), "sessions/x.json.bak": b"precious"}
    post = {promises.live_rel(): _doc(MSGS)}
    assert any(v.startswith("P6") for v in promises.check(exp, pre, post, acknowledged=False))
    shrunk = {promises.live_rel(): _doc(MSGS[:2])}
    assert any(
        v.startswith("P2")
        for v in promises.check(exp, {promises.live_rel(): _doc(MSGS)}, shrunk, acknowledged=True)
    )


def test_check_flags_a_deletion_that_comes_back():
    exp = promises.Expectation("hand", DELETE, {promises.live_rel(): _doc(MSGS)}, {})
    post = {promises.live_rel(): _doc(MSGS)}
    assert any("came back" in v for v in promises.check(exp, {}, post, acknowledged=False))


def test_spring_back_check_flags_an_undo_without_a_watermark(tmp_path):
    sessions = tmp_path / "sessions"
    sessions.mkdir()
    undone = _doc(MSGS[:4], intentional_shrink_generation="0" * 12 + "4" + "0" * 3 + "8" + "0" * 15)
    (sessions / f"{SID}.json").write_bytes(undone)
    exp = promises.Expectation(
        "hand", DELIBERATE, {promises.live_rel(): _doc(MSGS)}, {promises.live_rel(): undone}
    )
    found = promises.spring_back_violations(exp, {promises.live_rel(): undone}, sessions)
    assert found and all(v.startswith("P4") for v in found)

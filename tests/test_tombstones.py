"""Delete and pruned-orphan tombstones: durable, newest last, capped by recency, tolerant of corruption."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from api.rules.errors import BadRequest
from api.store import atomic, tombstones


def _file_ids(path: Path) -> list[str]:
    doc = json.loads(path.read_text())
    assert doc["version"] == 1
    return doc["ids"]


def test_added_ids_are_read_back_newest_last(state_dir):
    for sid in ("b", "a", "c"):
        tombstones.add_deleted(state_dir, sid)
    assert tombstones.read_deleted_ids(state_dir) == {"a", "b", "c"}
    assert _file_ids(state_dir / "_deleted_webui_sessions.json") == ["b", "a", "c"]


def test_adding_again_moves_an_id_to_the_newest_end(state_dir):
    for sid in ("a", "b", "a"):
        tombstones.add_deleted(state_dir, sid)
    assert tombstones.deleted_ids_newest_last(state_dir) == ["b", "a"]


def test_cap_keeps_the_most_recent_deletions_not_the_largest_ids(state_dir):
    ids = [f"z{n:05d}" for n in range(1005, 0, -1)]  # added in descending order: oldest are the largest
    for sid in ids:
        tombstones.add_deleted(state_dir, sid)
    kept = tombstones.deleted_ids_newest_last(state_dir)
    assert kept == ids[-tombstones.DELETED_CAP :]
    assert "z01005" not in kept and "z00001" in kept


def test_pruned_orphans_are_capped_at_500(state_dir):
    for n in range(510):
        tombstones.add_pruned(state_dir, f"p{n}")
    pruned = tombstones.read_pruned_ids(state_dir)
    assert len(pruned) == tombstones.PRUNED_CAP and "p509" in pruned and "p9" not in pruned


def test_remove_forgets_an_id_and_reports_whether_it_was_there(state_dir):
    tombstones.add_deleted(state_dir, "a")
    assert tombstones.remove_deleted(state_dir, "a") is True
    assert tombstones.remove_deleted(state_dir, "a") is False
    assert tombstones.read_deleted_ids(state_dir) == set()


def test_removing_an_absent_id_writes_nothing(state_dir):
    assert tombstones.remove_deleted(state_dir, "a") is False
    assert not (state_dir / "_deleted_webui_sessions.json").exists()


def test_forget_session_clears_both_tombstones(state_dir):
    tombstones.add_deleted(state_dir, "a")
    tombstones.add_pruned(state_dir, "a")
    tombstones.forget_session(state_dir, "a")
    assert tombstones.read_deleted_ids(state_dir) == tombstones.read_pruned_ids(state_dir) == set()


def test_a_missing_file_reads_as_empty(tmp_path):
    assert tombstones.read_deleted_ids(tmp_path) == set()


def test_a_corrupt_file_reads_as_empty_and_is_kept_before_it_is_overwritten(state_dir, caplog):
    path = state_dir / "_deleted_webui_sessions.json"
    path.write_bytes(b'{"version": 1, "ids": ["a", ')
    with caplog.at_level(logging.WARNING, logger="talaria.tombstones"):
        assert tombstones.read_deleted_ids(state_dir) == set()
    assert "not readable" in caplog.text
    tombstones.add_deleted(state_dir, "b")
    assert _file_ids(path) == ["b"]
    [kept] = state_dir.glob("_deleted_webui_sessions.json.corrupt-*")
    assert kept.read_bytes() == b'{"version": 1, "ids": ["a", '


def test_non_utf8_and_wrong_shapes_count_as_corrupt(state_dir):
    path = state_dir / "_deleted_webui_sessions.json"
    for raw in (b"\xff\xfe\x00", b'{"ids": "a"}', b"42"):
        path.write_bytes(raw)
        assert tombstones.read_deleted_ids(state_dir) == set()


def test_a_bare_list_and_unsafe_ids_are_tolerated(state_dir):
    (state_dir / "_deleted_webui_sessions.json").write_text(json.dumps(["a", "../x", 7, None, "b", "a"]))
    assert tombstones.deleted_ids_newest_last(state_dir) == ["b", "a"]


@pytest.mark.parametrize("sid", ["../x", "a/b", "", "x\x00y", "é", 5])
def test_unsafe_ids_are_refused(state_dir, sid):
    with pytest.raises(BadRequest):
        tombstones.add_deleted(state_dir, sid)
    assert tombstones.remove_deleted(state_dir, sid) is False
    assert not any(state_dir.iterdir())


def test_writes_are_durable(state_dir, monkeypatch):
    steps = []
    monkeypatch.setattr(atomic, "STEP_HOOK", lambda step, p: steps.append((step, Path(p).name)))
    tombstones.add_deleted(state_dir, "a")
    assert [s for s, _ in steps] == ["tmp_created", "tmp_written", "tmp_fsynced", "replaced", "dir_fsynced"]


def test_a_file_changed_by_another_writer_is_reread(state_dir):
    tombstones.add_deleted(state_dir, "a")
    assert tombstones.read_deleted_ids(state_dir) == {"a"}
    (state_dir / "_deleted_webui_sessions.json").write_text(json.dumps({"version": 1, "ids": ["a", "other"]}))
    assert tombstones.read_deleted_ids(state_dir) == {"a", "other"}


ops = st.lists(st.tuples(st.booleans(), st.sampled_from([f"s{i}" for i in range(8)])), max_size=25)


@settings(max_examples=40, deadline=None)
@given(ops)
def test_file_matches_a_recency_ordered_model(tmp_path_factory, operations):
    folder = tmp_path_factory.mktemp("tomb")
    model: list[str] = []
    for add, sid in operations:
        if add:
            tombstones.add_deleted(folder, sid)
            model = [x for x in model if x != sid] + [sid]
        else:
            assert tombstones.remove_deleted(folder, sid) is (sid in model)
            model = [x for x in model if x != sid]
    assert tombstones.deleted_ids_newest_last(folder) == model

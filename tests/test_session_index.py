"""The sidebar index: O(1) per save, flushed soon after, validated against the files."""

from __future__ import annotations

import json
import time

from api.store import models
from api.store.models import Session, all_sessions


def _save(sid, n=2, **kw):
    s = Session(
        session_id=sid,
        messages=[{"role": "user", "content": f"{sid}-{i}", "timestamp": float(i)} for i in range(n)],
        **kw,
    )
    s.save()
    return s


def _index_rows(state_dir):
    return {r["session_id"]: r for r in json.loads((state_dir / "_index.json").read_text())}


def test_index_file_is_a_json_array_of_compact_rows_after_flush(state_dir):
    _save("a")
    _save("b", n=3)
    models.store().index.flush()
    rows = _index_rows(state_dir)
    assert rows["b"]["message_count"] == 3
    assert rows["a"]["title"] == "Untitled"


def test_index_becomes_current_within_the_flush_delay(state_dir):
    _save("a")
    models.store().index.flush()
    _save("late", n=5)
    deadline = time.time() + 2.0
    while time.time() < deadline and "late" not in _index_rows(state_dir):
        time.sleep(0.05)
    assert _index_rows(state_dir)["late"]["message_count"] == 5


def test_listing_is_newest_first(state_dir):
    _save("old", updated_at=1.0).save(touch_updated_at=False)
    _save("new")
    assert [r["session_id"] for r in all_sessions()][:2] == ["new", "old"]


def test_index_rebuilds_rows_whose_files_changed_behind_it(state_dir):
    s = _save("a", n=2)
    models.store().index.flush()
    raw = json.loads(s.path.read_text())
    raw["messages"].append({"role": "user", "content": "added elsewhere", "timestamp": 9.0})
    raw["title"] = "edited elsewhere"
    s.path.write_text(json.dumps(raw, indent=2))
    models.store().index.forget(state_dir)
    row = next(r for r in all_sessions() if r["session_id"] == "a")
    assert row["title"] == "edited elsewhere"


def test_index_drops_rows_of_deleted_files_and_adds_unknown_files(state_dir):
    _save("a")
    _save("b")
    models.store().index.flush()
    (state_dir / "a.json").unlink()
    Session(session_id="c", messages=[{"role": "user", "content": "x"}]).save(skip_index=True)
    models.store().index.forget(state_dir)
    assert sorted(r["session_id"] for r in all_sessions()) == ["b", "c"]
    models.store().index.flush()
    assert sorted(_index_rows(state_dir)) == ["b", "c"]


def test_unparsable_index_file_is_rebuilt_from_the_files(state_dir):
    _save("a")
    models.store().index.flush()
    models.store().index.forget(state_dir)
    (state_dir / "_index.json").write_text("{not json")
    assert [r["session_id"] for r in all_sessions()] == ["a"]
    models.store().index.flush()
    assert list(_index_rows(state_dir)) == ["a"]


def test_rebuild_index_file_counts_every_session(state_dir):
    for i in range(5):
        Session(session_id=f"s{i}", messages=[{"role": "user", "content": "x"}] * i).save(skip_index=True)
    assert models.store().index.rebuild_index_file(state_dir) == 5
    rows = _index_rows(state_dir)
    assert {sid: r["message_count"] for sid, r in rows.items()} == {f"s{i}": i for i in range(5)}


def test_index_counts_match_files_after_many_saves(state_dir):
    s = _save("grow", n=1)
    for i in range(20):
        s.messages.append({"role": "assistant", "content": str(i), "timestamp": 100.0 + i})
        s.save()
    models.store().index.flush()
    assert (
        _index_rows(state_dir)["grow"]["message_count"]
        == len(json.loads(s.path.read_text())["messages"])
        == 21
    )


def test_a_large_rebuild_is_written_at_once(state_dir):
    for i in range(20):
        Session(session_id=f"s{i}", messages=[{"role": "user", "content": "x"}]).save(skip_index=True)
    models.store().index.forget(state_dir)
    assert len(all_sessions()) == 20
    assert len(_index_rows(state_dir)) == 20


def _rebuilt_row(state_dir, sid: str) -> dict:
    models.store().index.rebuild_index_file(state_dir)
    return next(r for r in all_sessions() if r["session_id"] == sid)


def test_rows_of_files_another_program_wrote_have_true_counts_and_last_message_time(state_dir):
    from talaria_testing import foreign_writer

    msgs = [
        {"role": "user", "content": "q1", "timestamp": 10.0},
        {"role": "assistant", "content": "a1", "timestamp": 11.0},
        {"role": "user", "content": "q2", "_ts": 20.0, "timestamp": 25.0},  # hermes-webui reads _ts first
        {"role": "tool", "content": "{}", "timestamp": 30.0},
    ]
    Session(session_id="fw", title="T", messages=msgs).save()
    foreign_writer.rewrite(state_dir / "fw.json", title="Theirs")
    row = _rebuilt_row(state_dir, "fw")
    assert (row["message_count"], row["user_message_count"], row["last_message_at"]) == (4, 2, 20.0)
    assert row["title"] == "Theirs"


def test_rows_read_from_the_prefix_of_talarias_own_files_equal_the_full_rows(state_dir):
    msgs = [{"role": "user", "content": f"q{i}", "timestamp": float(i)} for i in range(5)]
    session = Session(session_id="own", title="T", messages=msgs)
    session.save()
    full = session.compact()
    row = _rebuilt_row(state_dir, "own")
    for name in ("message_count", "user_message_count", "last_message_at"):
        assert row[name] == full[name], name


def test_rows_an_older_version_built_are_rebuilt_once(state_dir):
    """Older rows were built from the prefix alone, where user_message_count read 0 and last_message_at updated_at."""
    _save("old", n=3)
    models.store().index.flush()
    models.store().index.forget(state_dir)
    index_file = state_dir / "_index.json"
    rows = json.loads(index_file.read_text())
    for row in rows:
        row["_stat"] = row["_stat"][:2]
        row["user_message_count"] = 0
    index_file.write_text(json.dumps(rows))
    (row,) = [r for r in all_sessions() if r["session_id"] == "old"]
    assert row["user_message_count"] == 3

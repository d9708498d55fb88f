"""Startup recovery: genuine losses come back from the backup, intentional shrinks never do, nothing is destroyed."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from api.services import recovery_files, session_recovery
from api.services.session_recovery import (
    inspect_session_recovery_status,
    live_only_message_count,
    recover_all_sessions_on_startup,
    recover_session,
    recovery_verdict,
)
from api.store import atomic, tombstones

REPO = Path(__file__).resolve().parent.parent
MARKER = {"role": "user", "content": "[context compaction] summary of earlier turns", "timestamp": 1.0}


def _msg(role, content, ts):
    return {"role": role, "content": content, "timestamp": ts, "_ts": ts}


def _msgs(n, prefix="m"):
    return [_msg("user" if i % 2 == 0 else "assistant", f"{prefix}{i}", float(i + 1)) for i in range(n)]


def _doc(sid, messages, **fields):
    return {
        "session_id": sid,
        "title": "Untitled",
        "messages": messages,
        "message_count": len(messages),
        **fields,
    }


def _gen():
    return uuid.uuid4().hex


def _write(folder: Path, sid: str, live=None, bak=None) -> Path:
    path = folder / f"{sid}.json"
    for target, doc in ((path, live), (folder / f"{sid}.json.bak", bak)):
        if isinstance(doc, bytes):
            target.write_bytes(doc)
        elif doc is not None:
            target.write_text(json.dumps(doc), encoding="utf-8")
    return path


def _load(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def _kept(folder: Path, sid: str, tag: str) -> list[Path]:
    return sorted(folder.glob(f"{sid}.json.{tag}-*"))


def _cleared(sid, gen):
    return _doc(
        sid,
        [],
        context_messages=[],
        truncation_watermark=0.0,
        truncation_boundary=0.0,
        active_stream_id=None,
        pending_user_message=None,
        pending_attachments=[],
        pending_started_at=None,
        pending_user_source=None,
        clear_generation=gen,
    )


def _manual(sid, messages, context, generation=None, **fields):
    doc = _doc(
        sid,
        messages,
        context_messages=context,
        compression_anchor_summary="Compressed",
        compression_anchor_message_key={"role": "assistant", "ts": 2.0, "text": "m1", "attachments": 0},
        compression_anchor_mode="manual",
        truncation_watermark=1.0,
        truncation_boundary=1.0,
        **fields,
    )
    if generation is not None:
        doc["compression_generation"] = generation
    return doc


def _make_state_db(path: Path, sids=()) -> Path:
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE sessions(id TEXT PRIMARY KEY, source TEXT)")
    con.executemany("INSERT INTO sessions(id, source) VALUES (?, 'webui')", [(s,) for s in sids])
    con.commit()
    con.close()
    return path


# ------------------------------------------------------------------ the verdicts (docs/recovery.md)


def test_no_backup_recommends_no_backup(state_dir):
    path = _write(state_dir, "s", live=_doc("s", _msgs(3)))
    status = inspect_session_recovery_status(path)
    assert status == {"session_id": "s", "live_messages": 3, "bak_messages": -1, "recommend": "no_backup"}


def test_backup_not_larger_than_live_is_left_alone(state_dir):
    path = _write(state_dir, "s", live=_doc("s", _msgs(4)), bak=_doc("s", _msgs(4, "old")))
    assert inspect_session_recovery_status(path)["recommend"] == "no_action"
    assert recover_all_sessions_on_startup(state_dir)["restored"] == 0
    assert _load(path)["messages"] == _msgs(4)


def test_torn_backup_is_never_restored(state_dir):
    full = json.dumps(_doc("s", _msgs(10))).encode()
    path = _write(state_dir, "s", live=_doc("s", _msgs(2)), bak=full[: len(full) // 2])
    status = inspect_session_recovery_status(path)
    assert (status["bak_messages"], status["recommend"]) == (-1, "no_action")
    assert recover_all_sessions_on_startup(state_dir)["restored"] == 0
    assert len(_load(path)["messages"]) == 2


def test_corrupt_live_is_restored_and_kept_as_corrupt_file(state_dir):
    garbage = b'{"session_id": "s", "messages": [{"role": "us'
    path = _write(state_dir, "s", live=garbage, bak=_doc("s", _msgs(5)))
    assert inspect_session_recovery_status(path)["recommend"] == "restore"
    result = recover_all_sessions_on_startup(state_dir)
    assert result["restored"] == 1
    assert len(_load(path)["messages"]) == 5
    [kept] = _kept(state_dir, "s", "corrupt")
    assert kept.read_bytes() == garbage
    assert result["details"][0]["kept_path"] == str(kept)


def test_clear_sentinel_blocks_restore_of_pre_clear_backup(state_dir):
    path = _write(state_dir, "s", live=_cleared("s", _gen()), bak=_doc("s", _msgs(6)))
    status = inspect_session_recovery_status(path)
    assert status["recommend"] == "no_action"
    assert status["intentional_clear_truncate"] is True
    assert recover_all_sessions_on_startup(state_dir)["restored"] == 0


def test_clear_superseded_by_new_messages_blocks_restore(state_dir):
    live = dict(_cleared("s", _gen()), messages=_msgs(1, "new"))
    path = _write(state_dir, "s", live=live, bak=_doc("s", _msgs(6)))
    status = inspect_session_recovery_status(path)
    assert (status["recommend"], status.get("intentional_clear_truncate")) == ("no_action", True)


def test_backup_written_after_the_clear_is_restored(state_dir):
    gen = _gen()
    live = dict(_cleared("s", gen), messages=_msgs(1, "new"))
    bak = dict(_cleared("s", gen), messages=_msgs(4, "new"))
    path = _write(state_dir, "s", live=live, bak=bak)
    assert inspect_session_recovery_status(path)["recommend"] == "restore"


def test_intentional_compress_with_predating_backup_is_not_restored(state_dir):
    live = _manual("s", _msgs(2), _msgs(1))
    bak = dict(live, messages=_msgs(302), context_messages=_msgs(302))
    path = _write(state_dir, "s", live=live, bak=bak)
    status = inspect_session_recovery_status(path)
    assert (status["recommend"], status.get("intentional_compress_shrink")) == ("no_action", True)
    assert recover_all_sessions_on_startup(state_dir)["restored"] == 0
    assert len(_load(path)["messages"]) == 2


def test_post_compression_backup_with_same_size_context_is_restored(state_dir):
    live = _manual("s", _msgs(1), _msgs(1))
    bak = dict(live, messages=_msgs(4), context_messages=_msgs(1))
    path = _write(state_dir, "s", live=live, bak=bak)
    assert inspect_session_recovery_status(path)["recommend"] == "restore"
    assert recover_all_sessions_on_startup(state_dir)["restored"] == 1
    restored = _load(path)
    assert (len(restored["messages"]), len(restored["context_messages"])) == (4, 1)


def test_post_compression_backup_with_marker_is_restored_whatever_the_lengths(state_dir):
    live = _manual("s", _msgs(2), [MARKER])
    bak = dict(live, messages=_msgs(130), context_messages=[MARKER] + _msgs(49, "c"))
    path = _write(state_dir, "s", live=live, bak=bak)
    assert inspect_session_recovery_status(path)["recommend"] == "restore"
    assert recover_all_sessions_on_startup(state_dir)["restored"] == 1
    assert len(_load(path)["messages"]) == 130


def test_marker_with_compressed_summary_flag_counts_as_post_compression(state_dir):
    marker = {
        "role": "assistant",
        "content": "Context compaction: earlier turns",
        "_compressed_summary": True,
    }
    live = _manual("s", _msgs(2), _msgs(1))
    bak = dict(live, messages=_msgs(9), context_messages=[marker] + _msgs(5))
    assert recovery_verdict(live, bak)["recommend"] == "restore"


def test_compression_generation_same_on_backup_is_restored(state_dir):
    gen = _gen()
    live = _manual("s", _msgs(2), _msgs(1), generation=gen)
    bak = dict(live, messages=_msgs(9), context_messages=_msgs(7))  # larger, unmarked context
    path = _write(state_dir, "s", live=live, bak=bak)
    assert inspect_session_recovery_status(path)["recommend"] == "restore"


def test_compression_generation_different_on_backup_is_intentional(state_dir):
    live = _manual("s", _msgs(2), [MARKER], generation=_gen())
    bak = dict(live, messages=_msgs(9), context_messages=[MARKER], compression_generation=_gen())
    path = _write(state_dir, "s", live=live, bak=bak)
    status = inspect_session_recovery_status(path)
    assert (status["recommend"], status.get("intentional_compress_shrink")) == ("no_action", True)


def test_compression_generation_missing_on_backup_is_intentional(state_dir):
    live = _manual("s", _msgs(2), [MARKER], generation=_gen())
    bak = _manual("s", _msgs(9), [MARKER])  # marked, same-size context: only the stamp tells
    path = _write(state_dir, "s", live=live, bak=bak)
    status = inspect_session_recovery_status(path)
    assert (status["recommend"], status.get("intentional_compress_shrink")) == ("no_action", True)


def test_a_loss_after_hermes_webui_saved_a_compressed_session_is_restored(state_dir):
    """hermes-webui drops compression_generation when it saves; its backup written after the compression
    and a later genuine loss both carry the generation only in compression_anchor_details. The backup was
    read as older than the compression (its larger context) and the loss was not recovered."""
    gen = _gen()

    def as_hermes_webui_saves(doc):
        doc = {k: v for k, v in doc.items() if k != "compression_generation"}
        return dict(doc, compression_anchor_details={"message_idx": 1, "compression_generation": gen})

    live = as_hermes_webui_saves(_manual("s", _msgs(2), _msgs(1), generation=gen))
    bak = dict(live, messages=_msgs(9), context_messages=_msgs(7))  # larger, unmarked context
    path = _write(state_dir, "s", live=live, bak=bak)
    assert inspect_session_recovery_status(path)["recommend"] == "restore"
    older = dict(bak, compression_anchor_details={"message_idx": 1, "compression_generation": _gen()})
    assert recovery_verdict(live, older)["recommend"] == "no_action"


def test_live_without_compression_generation_falls_back_to_the_contexts():
    live = _manual("s", _msgs(2), _msgs(1))
    assert (
        recovery_verdict(live, dict(live, messages=_msgs(9), compression_generation=_gen()))["recommend"]
        == "restore"
    )
    bigger_ctx = dict(live, messages=_msgs(9), context_messages=_msgs(5), compression_generation=_gen())
    assert recovery_verdict(live, bigger_ctx)["recommend"] == "no_action"


def test_intentional_message_shrink_with_same_generation_is_restored(state_dir):
    gen = _gen()
    path = _write(
        state_dir,
        "s",
        live=_doc("s", _msgs(2), intentional_shrink_generation=gen),
        bak=_doc("s", _msgs(6), intentional_shrink_generation=gen),
    )
    assert inspect_session_recovery_status(path)["recommend"] == "restore"


def test_intentional_message_shrink_with_different_generation_is_not_restored(state_dir):
    path = _write(
        state_dir,
        "s",
        live=_doc("s", _msgs(2), intentional_shrink_generation=_gen()),
        bak=_doc("s", _msgs(6), intentional_shrink_generation=_gen()),
    )
    status = inspect_session_recovery_status(path)
    assert (status["recommend"], status.get("intentional_message_shrink")) == ("no_action", True)
    assert recover_all_sessions_on_startup(state_dir)["restored"] == 0


def test_intentional_message_shrink_with_malformed_backup_generation_is_restored(state_dir):
    path = _write(
        state_dir,
        "s",
        live=_doc("s", _msgs(2), intentional_shrink_generation=_gen()),
        bak=_doc("s", _msgs(6), intentional_shrink_generation="not-a-uuid"),
    )
    assert inspect_session_recovery_status(path)["recommend"] == "restore"


def test_intentional_message_shrink_with_missing_backup_generation_is_not_restored(state_dir):
    path = _write(
        state_dir,
        "s",
        live=_doc("s", _msgs(2), intentional_shrink_generation=_gen()),
        bak=_doc("s", _msgs(6)),
    )
    status = inspect_session_recovery_status(path)
    assert (status["recommend"], status.get("intentional_message_shrink")) == ("no_action", True)


def test_malformed_live_shrink_generation_is_no_stamp(state_dir):
    path = _write(
        state_dir,
        "s",
        live=_doc("s", _msgs(2), intentional_shrink_generation="A" * 32),
        bak=_doc("s", _msgs(6)),
    )
    assert inspect_session_recovery_status(path)["recommend"] == "restore"


# ------------------------------------------------------------------ orphan backups


def test_orphan_backup_with_state_row_is_recreated(state_dir, tmp_path):
    db = _make_state_db(tmp_path / "state.db", ["orph"])
    _write(state_dir, "orph", bak=_doc("orph", _msgs(3)))
    result = recover_all_sessions_on_startup(state_dir, state_db_path=db)
    assert (result["restored"], result["orphaned_backups"], result["scanned"]) == (1, 1, 1)
    assert len(_load(state_dir / "orph.json")["messages"]) == 3


def test_orphan_backup_without_state_row_is_left(state_dir, tmp_path):
    db = _make_state_db(tmp_path / "state.db", ["other"])
    _write(state_dir, "orph", bak=_doc("orph", _msgs(3)))
    result = recover_all_sessions_on_startup(state_dir, state_db_path=db)
    assert (result["restored"], result["orphaned_backups"]) == (0, 0)
    assert not (state_dir / "orph.json").exists()


def test_orphan_backup_is_recreated_when_state_db_cannot_tell(state_dir, tmp_path):
    _write(state_dir, "a", bak=_doc("a", _msgs(3)))
    _write(state_dir, "b", bak=_doc("b", _msgs(3)))
    assert recover_all_sessions_on_startup(state_dir)["restored"] == 1 + 1  # no state.db path: fail open
    _write(state_dir, "c", bak=_doc("c", _msgs(3)))
    result = recover_all_sessions_on_startup(state_dir, state_db_path=tmp_path / "missing.db")
    assert result["restored"] == 1


def test_tombstoned_orphan_backup_is_not_recreated(state_dir, tmp_path):
    db = _make_state_db(tmp_path / "state.db", ["gone"])
    _write(state_dir, "gone", bak=_doc("gone", _msgs(3)))
    tombstones.add_deleted(state_dir, "gone")
    assert recover_all_sessions_on_startup(state_dir, state_db_path=db)["restored"] == 0
    assert not (state_dir / "gone.json").exists()


def test_malformed_orphan_backup_is_not_recreated(state_dir):
    _write(state_dir, "bad", bak=b"[1, 2, 3]")
    _write(state_dir, "torn", bak=b'{"messages": [')
    assert recover_all_sessions_on_startup(state_dir)["restored"] == 0
    assert not (state_dir / "bad.json").exists() and not (state_dir / "torn.json").exists()


# ------------------------------------------------------------------ where Talaria keeps more than hermes-webui


def test_restore_keeps_the_replaced_file_and_counts_its_live_only_messages(state_dir):
    live_msgs = _msgs(2) + [_msg("user", "written after the earlier loss", 99.0)]
    path = _write(state_dir, "s", live=_doc("s", live_msgs), bak=_doc("s", _msgs(6)))
    before = path.read_bytes()
    result = recover_all_sessions_on_startup(state_dir)
    [detail] = result["details"]
    assert detail["live_only_messages"] == 1
    [kept] = _kept(state_dir, "s", "replaced")
    assert kept.read_bytes() == before
    assert detail["kept_path"] == str(kept)
    assert len(_load(path)["messages"]) == 6


def test_genuine_loss_after_manual_compression_is_recovered_via_generation(state_dir):
    gen = _gen()
    healthy = _manual("s", _msgs(40), _msgs(1) + _msgs(20, "later"), generation=gen)  # context grew since
    lost = dict(healthy, messages=_msgs(3), context_messages=_msgs(1))
    path = _write(state_dir, "s", live=lost, bak=healthy)
    assert inspect_session_recovery_status(path)["recommend"] == "restore"
    assert recover_all_sessions_on_startup(state_dir)["restored"] == 1
    assert len(_load(path)["messages"]) == 40


def test_restore_of_a_corrupt_live_file_keeps_its_bytes(state_dir):
    raw = b"\xff\xfe not json \x00"
    path = _write(state_dir, "s", live=raw, bak=_doc("s", _msgs(2)))
    recover_all_sessions_on_startup(state_dir)
    assert [p.read_bytes() for p in _kept(state_dir, "s", "corrupt")] == [raw]
    assert len(_load(path)["messages"]) == 2


def test_restore_is_on_disk_before_the_sweep_returns(state_dir, monkeypatch):
    steps = []
    monkeypatch.setattr(atomic, "STEP_HOOK", lambda step, p: steps.append((step, Path(p).name)))
    _write(state_dir, "s", live=_doc("s", _msgs(1)), bak=_doc("s", _msgs(3)))
    recover_all_sessions_on_startup(state_dir)
    replaced = steps.index(("replaced", "s.json"))
    assert any(step == "tmp_fsynced" and name.startswith("s.json.tmp.") for step, name in steps[:replaced])
    assert ("dir_fsynced", state_dir.name) in steps[replaced:]
    kept_synced = [i for i, (step, name) in enumerate(steps) if step == "dir_fsynced"]
    assert kept_synced[0] < replaced  # the kept file's name is durable before the live file changes


def test_saving_a_restored_session_leaves_the_kept_file_unchanged(state_dir):
    from api.store.models import Session

    _write(state_dir, "s", live=_doc("s", _msgs(1, "live")), bak=_doc("s", _msgs(3)))
    recover_all_sessions_on_startup(state_dir)
    [kept] = _kept(state_dir, "s", "replaced")
    before = kept.read_bytes()
    session = Session.load("s")
    session.messages.append(_msg("user", "after restore", 50.0))
    session.save()
    assert kept.read_bytes() == before
    assert len(_load(state_dir / "s.json")["messages"]) == 4


def test_recovery_is_idempotent_and_never_deletes_kept_files(state_dir):
    path = _write(state_dir, "s", live=_doc("s", _msgs(1)), bak=_doc("s", _msgs(3)))
    assert recover_all_sessions_on_startup(state_dir)["restored"] == 1
    assert recover_all_sessions_on_startup(state_dir)["restored"] == 0
    assert len(_kept(state_dir, "s", "replaced")) == 1
    assert (state_dir / "s.json.bak").exists()
    assert len(_load(path)["messages"]) == 3


def test_recover_session_restores_one_session_and_reports_it(state_dir):
    path = _write(state_dir, "s", live=_doc("s", _msgs(1)), bak=_doc("s", _msgs(3)))
    result = recover_session(path)
    assert (result["restored"], result["live_only_messages"], result["recommend"]) == (True, 0, "restore")
    assert recover_session(path) == {
        "session_id": "s",
        "live_messages": 3,
        "bak_messages": 3,
        "recommend": "no_action",
        "restored": False,
    }


def test_restored_sessions_are_seen_by_the_sidebar_and_the_cache(state_dir):
    from api.store import models

    path = _write(
        state_dir,
        "s",
        live=_doc("s", _msgs(2), created_at=1.0, updated_at=2.0),
        bak=_doc("s", _msgs(8), created_at=1.0, updated_at=2.0),
    )
    models.get_session("s")
    assert next(r for r in models.all_sessions() if r["session_id"] == "s")["message_count"] == 2
    recover_all_sessions_on_startup(state_dir)
    assert "s" not in models.store().sessions
    assert next(r for r in models.all_sessions() if r["session_id"] == "s")["message_count"] == 8
    assert len(models.get_session("s").messages) == len(_load(path)["messages"]) == 8


def test_rebuild_index_writes_the_index_when_it_is_missing(state_dir):
    _write(state_dir, "a", live=_doc("a", _msgs(2)))
    result = recover_all_sessions_on_startup(state_dir, rebuild_index=True)
    assert result["index_rebuilt"] is True
    rows = json.loads((state_dir / "_index.json").read_text())
    assert [r["session_id"] for r in rows] == ["a"]


def test_recovery_survives_an_index_that_cannot_be_rebuilt(store, monkeypatch):
    state_dir = store.session_dir

    def boom(*_a, **_k):
        raise RuntimeError("index broken")

    monkeypatch.setattr(store.index, "rebuild_index_file", boom)
    _write(state_dir, "s", live=_doc("s", _msgs(1)), bak=_doc("s", _msgs(3)))
    result = recover_all_sessions_on_startup(state_dir, rebuild_index=True)
    assert (result["restored"], result["index_rebuilt"]) == (1, False)


# ------------------------------------------------------------------ robustness


def test_sidecars_missing_most_fields_are_recovered(state_dir):
    path = _write(state_dir, "s", live={"messages": []}, bak={"messages": [{"content": "x"}]})
    assert recover_all_sessions_on_startup(state_dir)["restored"] == 1
    assert _load(path) == {"messages": [{"content": "x"}]}


def test_non_dict_live_json_is_treated_as_corrupt(state_dir):
    path = _write(state_dir, "s", live=[1, 2], bak=_doc("s", []))
    assert inspect_session_recovery_status(path)["live_messages"] == -1
    assert recover_all_sessions_on_startup(state_dir)["restored"] == 1
    assert len(_kept(state_dir, "s", "corrupt")) == 1


def test_hostile_file_names_are_skipped(state_dir):
    names = ["bad name", "dots.in.name", "ünïcode", "x" * 200 + "!", "semi;colon"]
    for name in names:
        _write(state_dir, name, live=_doc(name, []), bak=_doc(name, _msgs(3)))
    raw_name = os.fsencode(str(state_dir)) + b"/\xff\xfe.json"
    with open(raw_name, "wb") as fh:
        fh.write(b"{}")
    with open(raw_name + b".bak", "wb") as fh:
        fh.write(json.dumps(_doc("x", _msgs(3))).encode())
    result = recover_all_sessions_on_startup(state_dir)
    assert (result["restored"], result["scanned"]) == (0, 0)
    for name in names:
        assert _load(state_dir / f"{name}.json")["messages"] == []


def test_symlinked_backup_outside_the_folder_is_not_followed(state_dir, tmp_path):
    outside = tmp_path / "outside.json"
    outside.write_text(json.dumps(_doc("s", _msgs(9))))
    path = _write(state_dir, "s", live=_doc("s", _msgs(1)))
    os.symlink(outside, state_dir / "s.json.bak")
    assert recover_all_sessions_on_startup(state_dir)["restored"] == 0
    assert inspect_session_recovery_status(path)["recommend"] == "no_action"
    assert len(_load(path)["messages"]) == 1


def test_symlinked_live_file_outside_the_folder_is_never_replaced(state_dir, tmp_path):
    outside = tmp_path / "elsewhere.json"
    outside.write_text(json.dumps(_doc("s", _msgs(1))))
    os.symlink(outside, state_dir / "s.json")
    _write(state_dir, "s", bak=_doc("s", _msgs(5)))
    assert recover_all_sessions_on_startup(state_dir)["restored"] == 0
    assert (state_dir / "s.json").is_symlink() and len(_load(outside)["messages"]) == 1


def test_a_fifo_named_like_a_backup_does_not_hang_recovery(state_dir):
    _write(state_dir, "s", live=_doc("s", _msgs(1)))
    os.mkfifo(state_dir / "s.json.bak")
    _write(state_dir, "t", bak=_doc("t", _msgs(2)))
    os.mkfifo(state_dir / "t.json")
    assert recover_all_sessions_on_startup(state_dir)["restored"] == 0


def test_files_over_the_size_limit_are_skipped(state_dir, monkeypatch):
    monkeypatch.setattr(recovery_files, "MAX_FILE_BYTES", 200)
    path = _write(state_dir, "s", live=_doc("s", _msgs(1)), bak=_doc("s", _msgs(30)))
    assert recover_all_sessions_on_startup(state_dir)["restored"] == 0
    assert "skipped" in inspect_session_recovery_status(path)


def test_large_sessions_are_recovered(state_dir):
    big = [_msg("assistant", "x" * 5000, float(i)) for i in range(2000)]  # ~10 MB
    path = _write(state_dir, "s", live=_doc("s", big[:10]), bak=_doc("s", big))
    assert recover_all_sessions_on_startup(state_dir)["restored"] == 1
    assert len(_load(path)["messages"]) == 2000


def test_startup_recovery_never_raises(state_dir, monkeypatch):
    _write(state_dir, "s", live=_doc("s", _msgs(1)), bak=_doc("s", _msgs(3)))

    def boom(*_a, **_k):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(session_recovery, "_restore", boom)
    result = recover_all_sessions_on_startup(state_dir)
    assert result["restored"] == 0 and result["errors"]


def test_a_restore_that_cannot_keep_the_live_file_does_not_replace_it(state_dir, monkeypatch):
    path = _write(state_dir, "s", live=_doc("s", _msgs(1)), bak=_doc("s", _msgs(3)))

    def refuse(*_a, **_k):
        raise OSError("no space left")

    monkeypatch.setattr(atomic, "keep_aside", refuse)
    result = recover_all_sessions_on_startup(state_dir)
    assert result["restored"] == 0 and "no space left" in result["errors"][0]["error"]
    assert len(_load(path)["messages"]) == 1


def test_missing_session_folder_scans_nothing(tmp_path):
    result = recover_all_sessions_on_startup(tmp_path / "nope")
    assert (result["scanned"], result["restored"], result["orphaned_backups"], result["details"]) == (
        0,
        0,
        0,
        [],
    )


def test_scanned_counts_live_files_and_recreated_orphans(state_dir):
    for sid in ("a", "b", "c"):
        _write(state_dir, sid, live=_doc(sid, _msgs(1)))
    _write(state_dir, "o", bak=_doc("o", _msgs(1)))
    (state_dir / "_index.json").write_text("[]")
    assert recover_all_sessions_on_startup(state_dir)["scanned"] == 4


# ------------------------------------------------------------------ properties of the pure verdict

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12,
)
rows = st.lists(
    st.fixed_dictionaries(
        {
            "role": st.sampled_from(["user", "assistant", "tool"]),
            "content": st.text(max_size=10),
            "timestamp": st.floats(0, 1e9),
        }
    ),
    max_size=12,
)
uuid4s = st.uuids(version=4).map(lambda u: u.hex)
extra_fields = st.dictionaries(
    st.sampled_from(["title", "model", "pinned", "foo", "context_length"]), json_values, max_size=3
)


@given(
    json_values
    | st.dictionaries(
        st.sampled_from(["messages", "context_messages", "clear_generation", "compression_anchor_mode"]),
        json_values,
    ),
    json_values,
)
def test_verdict_is_total(live, bak):
    assert recovery_verdict(live, bak)["recommend"] in {"restore", "no_action"}
    assert recovery_verdict(live, None, bak_exists=False)["recommend"] == "no_backup"


@given(rows, rows, uuid4s, st.one_of(st.none(), uuid4s), extra_fields)
def test_a_clear_stamp_with_another_backup_generation_is_never_restored(
    new_rows, bak_rows, gen, bak_gen, extra
):
    live = dict(_cleared("s", gen), messages=new_rows)  # empty: the clear itself; else turns since the clear
    bak = {**extra, "messages": bak_rows, "clear_generation": bak_gen}
    assert recovery_verdict(live, bak)["recommend"] != "restore"


@given(rows, rows, uuid4s, st.one_of(st.none(), uuid4s), extra_fields)
def test_an_undo_stamp_with_another_backup_generation_is_never_restored(
    live_rows, bak_rows, gen, bak_gen, extra
):
    live = _doc("s", live_rows, intentional_shrink_generation=gen)
    bak = {**extra, "messages": bak_rows}
    if bak_gen is not None:
        bak["intentional_shrink_generation"] = bak_gen
    if bak_gen != gen:
        assert recovery_verdict(live, bak)["recommend"] != "restore"


@given(rows, rows, rows, uuid4s, st.one_of(st.none(), uuid4s), st.booleans())
def test_a_compression_stamp_with_another_backup_generation_is_never_restored(
    live_rows, bak_rows, ctx, gen, bak_gen, marked
):
    live = _manual("s", live_rows, ctx[:1], generation=gen)
    bak = {"messages": bak_rows, "context_messages": ([MARKER] if marked else []) + ctx}
    if bak_gen is not None:
        bak["compression_generation"] = bak_gen
    if bak_gen != gen:
        assert recovery_verdict(live, bak)["recommend"] != "restore"


@given(
    rows,
    st.lists(rows.filter(bool), min_size=1, max_size=1).map(lambda x: x[0]),
    st.booleans(),
    extra_fields,
    extra_fields,
)
def test_a_strictly_larger_backup_of_an_unstamped_session_is_always_restored(
    live_rows, more, with_context, live_extra, bak_extra
):
    live = {**live_extra, "messages": live_rows}
    if with_context:
        live["context_messages"] = list(live_rows)
    bak = {**bak_extra, "messages": live_rows + more}
    assert recovery_verdict(live, bak)["recommend"] == "restore"


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(rows, rows)
def test_live_only_messages_are_exactly_those_the_backup_lacks(common, extra):
    bak = {"messages": common}
    distinct = [dict(m, content=f"only-live-{i}") for i, m in enumerate(extra)]
    assert live_only_message_count({"messages": common + distinct}, bak) == len(distinct)
    assert live_only_message_count({"messages": common}, {"messages": common + extra}) == 0
    assert live_only_message_count(None, bak) == -1


# ------------------------------------------------------------------ audit, safe repair, CLI


def _kinds(report):
    return {(i["kind"], i["session_id"]): i["severity"] for i in report["items"]}


def _snapshot(folder: Path) -> dict:
    return {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}


@pytest.fixture
def messy(state_dir, tmp_path):
    """A folder with one of each thing the audit reports."""
    db = _make_state_db(tmp_path / "state.db", ["orph", "gone", "ok"])
    _write(state_dir, "ok", live=_doc("ok", _msgs(2)))
    _write(
        state_dir,
        "shrunk",
        live=_doc("shrunk", _msgs(1) + [_msg("user", "live only", 50.0)]),
        bak=_doc("shrunk", _msgs(5)),
    )
    _write(
        state_dir,
        "compressed",
        live=_manual("compressed", _msgs(2), _msgs(1)),
        bak=_doc("compressed", _msgs(9), context_messages=_msgs(9)),
    )
    _write(state_dir, "orph", bak=_doc("orph", _msgs(2)))
    _write(state_dir, "nostate", bak=_doc("nostate", _msgs(2)))
    _write(state_dir, "malformed", bak=b"not json")
    _write(state_dir, "gone", bak=_doc("gone", _msgs(2)))
    tombstones.add_deleted(state_dir, "gone")
    _write(state_dir, "broken", live=b"{{{")
    _write(state_dir, "pending", live=_doc("pending", _msgs(1), pending_user_message="hi"))
    _write(state_dir, "odd name", live=_doc("x", []))
    (state_dir / "_index.json").write_text(json.dumps([{"session_id": "ok"}, {"session_id": "vanished"}]))
    return state_dir, db


def test_audit_reports_every_kind_and_changes_nothing(messy):
    folder, db = messy
    before = _snapshot(folder)
    report = session_recovery.audit_session_recovery(folder, state_db_path=db)
    assert _snapshot(folder) == before
    kinds = _kinds(report)
    assert kinds[("shrunken_live", "shrunk")] == "repairable"
    assert kinds[("orphan_backup", "orph")] == "repairable"
    assert kinds[("orphan_backup_without_state_row", "nostate")] == "unsafe_to_repair"
    assert kinds[("malformed_orphan_backup", "malformed")] == "unsafe_to_repair"
    assert kinds[("orphan_backup_tombstoned", "gone")] == "info"
    assert kinds[("state_db_deleted_webui_tombstone", "gone")] == "info"
    assert kinds[("corrupt_live", "broken")] == "unsafe_to_repair"
    assert kinds[("turn_journal_pending_turn", "pending")] == "info"
    assert kinds[("index_missing_file", "vanished")] == "repairable"
    assert kinds[("index_missing_entry", "shrunk")] == "repairable"
    assert ("unrecognised_name", None) in kinds
    assert [kind for kind, sid in kinds if sid == "compressed"] == ["index_missing_entry"]
    shrunk = next(i for i in report["items"] if i["kind"] == "shrunken_live")
    assert shrunk["live_only_messages"] == 1
    assert report["status"] == "needs_manual_review"
    assert report["summary"]["unsafe_to_repair"] == 3


def test_audit_of_a_healthy_folder_is_ok(state_dir):
    _write(state_dir, "a", live=_doc("a", _msgs(2)))
    (state_dir / "_index.json").write_text(json.dumps([{"session_id": "a"}]))
    report = session_recovery.audit_session_recovery(state_dir)
    assert (report["status"], report["summary"], report["items"]) == (
        "ok",
        {"ok": 1, "repairable": 0, "unsafe_to_repair": 0},
        [],
    )


def test_audit_reports_kept_files_until_a_person_removes_them(state_dir):
    _write(state_dir, "a", live=_doc("a", _msgs(1)), bak=_doc("a", _msgs(3)))
    _write(state_dir, "b", live=_doc("b", [_msg("user", "only here", 7.0)]), bak=_doc("b", _msgs(3)))
    _write(state_dir, "c", live=b"garbage", bak=_doc("c", _msgs(1)))
    recover_all_sessions_on_startup(state_dir, rebuild_index=True)
    kinds = _kinds(session_recovery.audit_session_recovery(state_dir))
    assert kinds[("kept_replaced_file", "a")] == "info"
    assert kinds[("kept_replaced_file", "b")] == "unsafe_to_repair"
    assert kinds[("kept_corrupt_file", "c")] == "unsafe_to_repair"


def test_repair_safe_fixes_what_is_safe_and_leaves_the_rest(messy):
    folder, db = messy
    result = session_recovery.repair_safe_session_recovery(folder, state_db_path=db)
    assert {d["session_id"] for d in result["recovery"]["details"]} == {"shrunk", "orph"}
    assert result["recovery"]["index_rebuilt"] is True
    after = _kinds(result["after"])
    assert result["after"]["summary"]["repairable"] == 0
    assert ("orphan_backup_without_state_row", "nostate") in after
    assert ("kept_replaced_file", "shrunk") in after
    assert len(_load(folder / "compressed.json")["messages"]) == 2
    assert result["status"] == "needs_manual_review"


def _cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "api.services.session_recovery", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
    )


def test_cli_audit_prints_json_and_exits_by_status(state_dir, tmp_path):
    _write(state_dir, "s", live=_doc("s", _msgs(1)), bak=_doc("s", _msgs(3)))
    (state_dir / "_index.json").write_text(json.dumps([{"session_id": "s"}]))
    proc = _cli("--audit", "--session-dir", str(state_dir), "--state-db", str(tmp_path / "none.db"), "--json")
    assert proc.returncode == 1, proc.stderr
    report = json.loads(proc.stdout)
    assert (report["status"], [i["kind"] for i in report["items"]]) == ("warn", ["shrunken_live"])
    assert len(_load(state_dir / "s.json")["messages"]) == 1


def test_cli_repair_safe_restores_and_prints_a_readable_report(state_dir, tmp_path):
    _write(state_dir, "s", live=_doc("s", _msgs(1)), bak=_doc("s", _msgs(3)))
    proc = _cli("--repair-safe", "--session-dir", str(state_dir), "--state-db", str(tmp_path / "none.db"))
    assert proc.returncode == 0, proc.stderr
    assert "restored 1 session(s)" in proc.stdout and "status: ok" in proc.stdout
    assert len(_load(state_dir / "s.json")["messages"]) == 3


def test_cli_requires_an_action():
    proc = _cli("--json")
    assert proc.returncode == 2 and "--audit" in proc.stderr


def test_audit_reports_state_db_sessions_without_a_file(state_dir, tmp_path):
    db = tmp_path / "state.db"
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE sessions(id TEXT PRIMARY KEY, source TEXT, message_count INTEGER)")
    rows = [
        ("lost", "webui", 12),
        ("empty", "webui", 0),
        ("cli", "cli", 5),
        ("pruned", "webui", 0),
        ("here", "webui", 2),
    ]
    con.executemany("INSERT INTO sessions VALUES (?, ?, ?)", rows)
    con.commit()
    con.close()
    tombstones.add_pruned(state_dir, "pruned")
    _write(state_dir, "here", live=_doc("here", _msgs(2)))
    kinds = _kinds(session_recovery.audit_session_recovery(state_dir, state_db_path=db))
    assert kinds[("state_db_missing_sidecar", "lost")] == "unsafe_to_repair"
    assert kinds[("state_db_orphan_webui_row", "empty")] == "info"
    assert not {sid for _, sid in kinds} & {"cli", "pruned"}

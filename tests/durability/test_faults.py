"""Disk full, read-only file system and I/O errors during a save.

The person gets a clear error, nothing on disk is damaged, the session in memory is what the file holds
(promise 10) and a later save succeeds without writing the change that failed. A real small tmpfs is used when this process may mount one (root); the same faults
are also injected at the system call, which works everywhere.
"""

from __future__ import annotations

import contextlib
import errno
import io
import json
from pathlib import Path

import pytest

from api.services.session_recovery import recover_all_sessions_on_startup
from api.store import models
from talaria_testing import failed_saves, promises
from talaria_testing.faults import FaultInjector, fill, remount, small_tmpfs
from talaria_testing.scenarios import SID, bound, message, messages

SECTION = "faults"


def _session_file(sessions: Path) -> Path:
    return sessions / f"{SID}.json"


def _leftovers(sessions: Path) -> list[str]:
    return sorted(p.name for p in sessions.iterdir() if ".tmp." in p.name)


def _grow_and_fail(sessions: Path, make_fault, counters, label: str) -> None:
    """Save a grown session under a fault, check the promises, lift the fault, pin it."""
    s = models.Session(session_id=SID, title="Faults", model="fake", messages=messages(10))
    s.save()
    models.cache_session(s)
    before = _session_file(sessions).read_bytes()
    s.messages.extend(messages(4, start=10))
    with make_fault() as fault, pytest.raises(OSError) as caught:
        s.save()
    counters.add(SECTION, "faults_injected")
    counters.add(SECTION, f"fault.{label}")
    assert caught.value.errno in (errno.ENOSPC, errno.EROFS, errno.EIO), caught.value
    if fault is not None and hasattr(fault, "fired"):
        assert fault.fired, "the fault never fired"
    after = _session_file(sessions).read_bytes()
    doc = promises.parse(after)
    assert isinstance(doc, dict), "the live file is damaged"
    assert after == before or len(doc["messages"]) == 14, (
        "the live file is neither the old nor the new version"
    )
    assert _leftovers(sessions) == [], "a temp file was left behind"
    # Promise 10: memory holds what the file holds, and a later save (a pin) writes no unsaved row.
    assert models.get_session(SID).messages == doc["messages"], "the cache kept a change that was not saved"
    pinned = models.get_session(SID)
    pinned.pinned = True
    pinned.save()
    assert len(models.Session.load(SID).messages) == len(doc["messages"])
    assert models.Session.load(SID).pinned is True


INJECTED = [
    ("enospc_at_create", errno.ENOSPC, "open", 0),
    ("enospc_at_first_write", errno.ENOSPC, "write", 0),
    ("enospc_mid_write", errno.ENOSPC, "write", 1000),
    ("erofs_at_create", errno.EROFS, "open", 0),
    ("eio_at_fsync", errno.EIO, "fsync", 0),
    ("eio_at_folder_fsync", errno.EIO, "fsync_dir", 0),
]


@pytest.mark.parametrize(("label", "err", "at", "after_bytes"), INJECTED, ids=[c[0] for c in INJECTED])
def test_injected_fault_during_save_changes_nothing_and_a_later_save_succeeds(
    label, err, at, after_bytes, counters, tmp_path
):
    with bound(tmp_path) as sessions:
        _grow_and_fail(
            sessions,
            lambda: FaultInjector(
                sessions,
                err,
                at,
                match=lambda n: n.startswith(SID) or n == "sessions",
                after_bytes=after_bytes,
            ),
            counters,
            label,
        )


def _shrink_under_fault_then_recover(s, sessions, fault, counters, *, expected: int) -> None:
    """Save ``s`` cut to 3 rows while ``fault`` holds, restart recovery, and expect all rows back."""
    s.messages = s.messages[:3]
    with fault:
        try:
            s.save()
        except OSError:
            pass
    counters.add(SECTION, "faults_injected")
    recover_all_sessions_on_startup(sessions, rebuild_index=True)
    assert len(models.Session.load(SID).messages) == expected, (
        "the dropped rows are gone for good: no backup was written"
    )


def test_shrinking_save_never_lands_without_its_backup(counters, tmp_path):
    """Promise 5: a save that drops rows without provenance stays recoverable even when its backup cannot be written."""
    with bound(tmp_path) as sessions:
        s = models.Session(session_id=SID, title="Faults", model="fake", messages=messages(12))
        s.save()
        # the #1558 bug shape: a stale stub saved over the full file
        no_room_for_backup = FaultInjector(
            sessions, errno.ENOSPC, "open", match=lambda n: n.startswith(f"{SID}.json.bak")
        )
        _shrink_under_fault_then_recover(s, sessions, no_room_for_backup, counters, expected=12)


def test_disk_full_on_a_real_small_tmpfs(counters, tmp_path):
    with small_tmpfs(tmp_path / "mnt", "512k") as mnt:
        if mnt is None:
            pytest.skip("mounting a tmpfs is not permitted here (the injected faults cover this)")
        with bound(mnt) as sessions:
            filler: list[Path] = []

            class DiskFull:
                def __enter__(self):
                    filler.append(fill(mnt))
                    return None

                def __exit__(self, *exc):
                    filler.pop().unlink()

            _grow_and_fail(sessions, DiskFull, counters, "real_tmpfs_enospc")
        counters.set(SECTION, "real_tmpfs", True)


def test_disk_full_shrinking_save_on_a_real_small_tmpfs(counters, tmp_path):
    """The backup of a large file does not fit, the shrunk file does: the loss must stay recoverable."""
    with small_tmpfs(tmp_path / "mnt", "1m") as mnt:
        if mnt is None:
            pytest.skip("mounting a tmpfs is not permitted here")
        with bound(mnt) as sessions:
            big = [dict(message(i), content=f"row {i} " + "z" * 4000) for i in range(60)]
            s = models.Session(session_id=SID, title="Faults", model="fake", messages=big)
            s.save()

            models.store().index.flush()
            filler = fill(mnt)
            filler_size = filler.stat().st_size
            filler.unlink()
            (mnt / "filler").write_bytes(b"\0" * (filler_size - 64 * 1024))  # leave ~64 KiB free
            _shrink_under_fault_then_recover(s, sessions, contextlib.nullcontext(), counters, expected=60)


def test_read_only_file_system_during_save(counters, tmp_path):
    with small_tmpfs(tmp_path / "mnt", "512k") as mnt:
        if mnt is None:
            pytest.skip("mounting a tmpfs is not permitted here (the injected EROFS covers this)")
        with bound(mnt) as sessions:

            class ReadOnly:
                def __enter__(self):
                    remount(mnt, "ro")

                def __exit__(self, *exc):
                    remount(mnt, "rw")

            _grow_and_fail(sessions, ReadOnly, counters, "real_read_only")


class _Handler:
    def __init__(self):
        self.wfile = io.BytesIO()
        self.status = None
        self.headers = {}
        self.command = "POST"

    def send_response(self, status):
        self.status = status

    def send_header(self, key, value):
        pass

    def end_headers(self):
        pass


@pytest.mark.parametrize(
    ("err", "words"), [(errno.ENOSPC, ("space", "full")), (errno.EROFS, ("read-only", "read only"))]
)
def test_the_api_answers_a_failed_save_with_a_json_error_that_names_the_cause(err, words, counters, tmp_path):
    from api.web import routes

    with bound(tmp_path) as sessions:
        models.Session(session_id=SID, title="Faults", model="fake", messages=messages(6)).save()
        before = _session_file(sessions).read_bytes()
        handler = _Handler()
        with FaultInjector(sessions, err, "open", match=lambda n: n.startswith(SID)):
            routes.dispatch(handler, "POST", "/api/session/rename", {}, {"session_id": SID, "title": "New"})
        counters.add(SECTION, "api_faults")
        payload = json.loads(handler.wfile.getvalue())
        assert handler.status >= 500 and set(payload) == {"error"}, (handler.status, payload)
        assert _session_file(sessions).read_bytes() == before
        assert any(w in payload["error"].lower() for w in words), f"unclear error for the person: {payload}"


@pytest.mark.integration
@pytest.mark.parametrize("fault", ["disk_full", "read_only"])
def test_a_failed_clear_through_the_server_changes_nothing_and_a_later_pin_keeps_the_transcript(
    fault, tmp_path
):
    """The reported case: a clear answered 507, and the next pin wrote the empty transcript for good."""
    from talaria_testing.server_proc import ServerProc

    srv = ServerProc(tmp_path)
    with small_tmpfs(srv.session_dir, "4m") as mnt:
        if mnt is None:
            pytest.skip("mounting a tmpfs is not permitted here")
        with srv:
            rows = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"row {i}"} for i in range(6)]
            sid = srv.post_json("/api/session/import", {"title": "Kept", "messages": rows})["session"][
                "session_id"
            ]
            path = srv.session_dir / f"{sid}.json"
            before = path.read_bytes()
            with (failed_saves.FAULTS[fault])(mnt):
                status, answer = srv.json("POST", "/api/session/clear", {"session_id": sid})
                assert status in (503, 507) and set(answer) == {"error"}, (status, answer)
                shown = srv.get_json(f"/api/session?session_id={sid}")["session"]
                assert [m["content"] for m in shown["messages"]] == [r["content"] for r in rows]
            assert path.read_bytes() == before
            srv.post_json("/api/session/pin", {"session_id": sid, "pinned": True})
            doc = json.loads(path.read_bytes())
            assert doc["pinned"] is True and [m["content"] for m in doc["messages"]] == [
                r["content"] for r in rows
            ]

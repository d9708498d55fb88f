"""Durable writes: each step in order, nothing torn, kept files never clobbered."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import threading
import time

import pytest

from api.store import atomic


@pytest.fixture
def steps(monkeypatch):
    seen = []
    monkeypatch.setattr(atomic, "STEP_HOOK", lambda step, path: seen.append((step, path.name)))
    return seen


def test_durable_write_syncs_file_then_folder_in_order(tmp_path, steps, monkeypatch):
    synced = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd)))
    target = tmp_path / "a.json"
    atomic.write_bytes_durable(target, b"hello")
    assert target.read_bytes() == b"hello"
    assert [s for s, _ in steps] == ["tmp_created", "tmp_written", "tmp_fsynced", "replaced", "dir_fsynced"]
    assert len(synced) == 2
    assert [p.name for p in tmp_path.iterdir()] == ["a.json"]


def test_failed_write_leaves_the_old_file_and_no_temp(tmp_path, monkeypatch):
    target = tmp_path / "a.json"
    target.write_bytes(b"old")

    def boom(step, path):
        if step == "tmp_written":
            raise OSError(28, "No space left on device")

    monkeypatch.setattr(atomic, "STEP_HOOK", boom)
    with pytest.raises(OSError):
        atomic.write_bytes_durable(target, b"new")
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["a.json"]


def test_keep_aside_never_overwrites_an_earlier_kept_file(tmp_path):
    target = tmp_path / "s.json"
    target.write_bytes(b"one")
    first = atomic.keep_aside(target, "corrupt")
    target.write_bytes(b"two")
    second = atomic.keep_aside(target, "corrupt")
    assert first != second
    assert first.read_bytes() == b"one"
    assert second.read_bytes() == b"two"
    assert first.name.startswith("s.json.corrupt-")


def test_keep_aside_of_a_missing_file_is_none(tmp_path):
    assert atomic.keep_aside(tmp_path / "missing.json", "replaced") is None


def test_copy_durable_copies_bytes(tmp_path):
    (tmp_path / "a").write_bytes(b"xyz")
    assert atomic.copy_durable(tmp_path / "a", tmp_path / "b") == b"xyz"
    assert (tmp_path / "b").read_bytes() == b"xyz"


def test_unlink_durable_reports_whether_it_removed(tmp_path):
    (tmp_path / "a").write_bytes(b"x")
    assert atomic.unlink_durable(tmp_path / "a") is True
    assert atomic.unlink_durable(tmp_path / "a") is False


def test_a_link_planted_at_a_temp_name_is_never_written_through(tmp_path, monkeypatch):
    """The temp file was ``<name>.tmp.<pid>.<thread id>``, opened with O_CREAT|O_TRUNC: a link planted at
    that guessable name carried the write to its target outside the folder, and the rename then left the
    link itself at the final name. Here links are planted both at that name and at the first name the
    writer will draw: the write lands in the folder, a regular file, and the targets stay untouched."""
    folder, outside = tmp_path / "uploads", tmp_path / "outside"
    folder.mkdir()
    outside.mkdir()
    target = folder / "report.txt"
    drawn = iter(["feedfeedfeedfeed"])
    real_token = secrets.token_hex
    monkeypatch.setattr(secrets, "token_hex", lambda n=None: next(drawn, None) or real_token(n))
    go = threading.Event()
    writer = threading.Thread(target=lambda: (go.wait(10), atomic.write_bytes_durable(target, b"UPLOADED")))
    writer.start()
    planted = [
        f"report.txt.tmp.{os.getpid()}.{writer.ident}",
        f"report.txt.tmp.{os.getpid()}.feedfeedfeedfeed",
    ]
    for n, name in enumerate(planted):
        (outside / f"victim{n}").write_bytes(b"KEEP")
        os.symlink(outside / f"victim{n}", folder / name)
    go.set()
    writer.join(10)
    assert not target.is_symlink() and target.read_bytes() == b"UPLOADED"
    assert [p.read_bytes() for p in sorted(outside.iterdir())] == [b"KEEP", b"KEEP"]
    assert sorted(p.name for p in folder.iterdir()) == sorted(["report.txt", *planted])


def test_a_new_file_never_replaces_one_that_appeared_meanwhile(tmp_path):
    folder = tmp_path / "uploads"
    folder.mkdir()
    (folder / "a.txt").write_bytes(b"THEIRS")
    os.symlink(tmp_path / "elsewhere", folder / "a-1.txt")
    fd = atomic.open_folder(tmp_path, "uploads")
    try:
        name = atomic.write_new_durable(fd, iter(["a.txt", "a-1.txt", "a-2.txt"]), b"MINE")
    finally:
        os.close(fd)
    assert name == "a-2.txt"
    assert (folder / "a.txt").read_bytes() == b"THEIRS" and (folder / "a-2.txt").read_bytes() == b"MINE"
    assert not (tmp_path / "elsewhere").exists()
    assert sorted(p.name for p in folder.iterdir()) == ["a-1.txt", "a-2.txt", "a.txt"]


def test_a_folder_that_is_a_link_is_not_opened_for_writing(tmp_path):
    (tmp_path / "outside").mkdir()
    os.symlink(tmp_path / "outside", tmp_path / "uploads")
    with pytest.raises(OSError):
        atomic.open_folder(tmp_path, "uploads")


def test_the_sweep_removes_only_temp_files_of_gone_processes_or_long_abandoned(tmp_path):
    """A live writer's fresh temp file stays; one naming a process that is gone, or older than the grace
    period, goes; names that are not our temp files stay whatever their age."""
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait(10)
    live = os.getpid()
    names = {
        f"a.json.tmp.{live}.0123abcd": True,
        f"b.json.tmp.{gone.pid}.0123abcd": False,
        f"c.json.tmp.{live}.4567cdef": False,  # made old below
        "notes.tmp.txt": True,
        f"d.json.tmp.{gone.pid}.not-hex": True,
    }
    for name in names:
        (tmp_path / name).write_bytes(b"partial")
    old = time.time() - atomic.TEMP_GRACE_S - 60
    os.utime(tmp_path / f"c.json.tmp.{live}.4567cdef", (old, old))
    os.utime(tmp_path / "notes.tmp.txt", (old, old))
    swept = atomic.sweep_leftover_temps(tmp_path)
    assert sorted(swept) == sorted(name for name, stays in names.items() if not stays)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        name for name, stays in names.items() if stays
    )


def test_a_folder_reached_inside_a_root_never_passes_through_a_link(tmp_path):
    root = tmp_path / "root"
    (root / "a" / "b").mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    os.symlink(outside, root / "a" / "door")
    (root / "a" / "file").write_text("x")
    fd = atomic.open_folder_inside(root, ["a", "b"])
    try:
        assert atomic.write_new_durable(fd, ["new.txt"], b"data") == "new.txt"
    finally:
        os.close(fd)
    assert (root / "a" / "b" / "new.txt").read_bytes() == b"data"
    for parts in (["a", "door"], ["a", "file"], ["a", "missing"]):
        with pytest.raises(OSError):
            os.close(atomic.open_folder_inside(root, parts))
    assert list(outside.iterdir()) == []


def test_a_listing_hides_the_temp_files_of_writes_in_flight_here_or_killed(tmp_path):
    mine = f"report.txt.tmp.{os.getpid()}.{secrets.token_hex(8)}"
    gone = f"report.txt.tmp.{2**22 + 7}.{secrets.token_hex(8)}"  # above pid_max: no such process
    for name in (mine, gone, "report.txt", "notes.tmp.txt"):
        (tmp_path / name).write_text("x")
    with os.scandir(tmp_path) as found:
        hidden = sorted(item.name for item in found if atomic.unfinished_write(item.name, item.stat))
    assert hidden == sorted([mine, gone])

"""Durable writes: each step in order, nothing torn, kept files never clobbered."""

from __future__ import annotations

import os

import pytest

from api import atomic


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

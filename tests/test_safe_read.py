"""The one safe reader: opened once, judged on the descriptor; FIFOs, links, folders and oversize refused."""

from __future__ import annotations

import os

import pytest

from api.store.safe_read import TooLarge, UnsafeFile, read_regular_file


def test_a_regular_file_is_read_with_its_stat(tmp_path):
    (tmp_path / "a.png").write_bytes(b"12345")
    st, data = read_regular_file(tmp_path / "a.png", max_bytes=5)
    assert data == b"12345" and st.st_size == 5


def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path):
    os.mkfifo(tmp_path / "pipe.png")
    with pytest.raises(UnsafeFile) as refused:
        read_regular_file(tmp_path / "pipe.png")
    assert refused.value.problem == "not a regular file"


def test_a_folder_a_link_and_a_missing_file(tmp_path):
    (tmp_path / "dir").mkdir()
    (tmp_path / "real.png").write_bytes(b"x")
    os.symlink(tmp_path / "real.png", tmp_path / "link.png")
    with pytest.raises(UnsafeFile):
        read_regular_file(tmp_path / "dir")
    with pytest.raises(UnsafeFile):
        read_regular_file(tmp_path / "link.png")
    assert read_regular_file(tmp_path / "missing.png") is None


def test_a_file_over_the_limit_is_refused_unread(tmp_path):
    (tmp_path / "big.png").write_bytes(b"x" * 11)
    with pytest.raises(TooLarge):
        read_regular_file(tmp_path / "big.png", max_bytes=10)


def test_a_file_reached_through_a_folder_outside_is_refused(tmp_path):
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "a.png").write_bytes(b"x")
    (tmp_path / "ws").mkdir()
    os.symlink(tmp_path / "outside", tmp_path / "ws" / "sub")
    with pytest.raises(UnsafeFile):
        read_regular_file(tmp_path / "ws" / "sub" / "a.png", inside=tmp_path / "ws")

"""The one safe reader of session files, under the store's policy (no link) and recovery's (links inside)."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from api.services.recovery_files import MAX_FILE_BYTES, read_doc
from api.store.models import Session
from api.store.session_files import UnsafeFile, read_metadata_prefix, read_regular_file, read_session_file

DOC = b'{\n  "session_id": "s",\n  "title": "t",\n  "messages": [{"role": "user", "content": "hi"}]\n}'


def _finishes(call, seconds: float = 10.0):
    """Run ``call`` in a thread; its outcome, or a failure when it is still blocked after ``seconds``."""
    outcome: dict = {}

    def run() -> None:
        try:
            outcome["value"] = call()
        except BaseException as exc:  # noqa: BLE001 - handed back to the test
            outcome["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), "the read blocked"
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def test_a_regular_file_is_read_whole_or_up_to_the_limit(tmp_path):
    path = tmp_path / "s.json"
    path.write_bytes(DOC)
    st, data = read_regular_file(path)
    assert data == DOC and st.st_size == len(DOC)
    assert read_regular_file(path, limit=5)[1] == DOC[:5]
    assert read_doc(path, tmp_path).count == 1


def test_a_missing_file_is_none_for_the_store_and_absent_for_recovery(tmp_path):
    assert read_session_file(tmp_path / "gone.json") is None
    doc = read_doc(tmp_path / "gone.json", tmp_path)
    assert not doc.exists and doc.problem is None


def test_the_store_refuses_a_symlink_even_to_a_file_in_its_folder(tmp_path):
    (tmp_path / "real.json").write_bytes(DOC)
    (tmp_path / "s.json").symlink_to(tmp_path / "real.json")
    with pytest.raises(UnsafeFile, match="symbolic link"):
        read_session_file(tmp_path / "s.json")


def test_recovery_follows_a_symlink_whose_target_is_in_the_folder(tmp_path):
    (tmp_path / "real.json").write_bytes(DOC)
    (tmp_path / "s.json").symlink_to("real.json")
    doc = read_doc(tmp_path / "s.json", tmp_path)
    assert doc.problem is None and doc.data == DOC


def test_a_symlink_leading_outside_the_folder_is_refused_by_both_policies(tmp_path):
    folder = tmp_path / "sessions"
    folder.mkdir()
    (tmp_path / "outside.json").write_bytes(DOC)
    (folder / "s.json").symlink_to(tmp_path / "outside.json")
    with pytest.raises(UnsafeFile):
        read_session_file(folder / "s.json")
    doc = read_doc(folder / "s.json", folder)
    assert doc.exists and doc.data is None
    assert doc.problem == "symlink leading outside the session folder"


def test_a_link_to_a_link_that_leaves_the_folder_is_refused(tmp_path):
    folder = tmp_path / "sessions"
    folder.mkdir()
    (tmp_path / "outside.json").write_bytes(DOC)
    (folder / "hop.json").symlink_to(tmp_path / "outside.json")
    (folder / "s.json").symlink_to("hop.json")
    assert read_doc(folder / "s.json", folder).problem == "symlink leading outside the session folder"


def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path):
    os.mkfifo(tmp_path / "s.json")
    with pytest.raises(UnsafeFile, match="not a regular file"):
        _finishes(lambda: read_session_file(tmp_path / "s.json"))
    doc = _finishes(lambda: read_doc(tmp_path / "s.json", tmp_path))
    assert doc.exists and doc.problem == "not a regular file"


def test_a_fifo_behind_a_link_inside_the_folder_is_refused_without_waiting(tmp_path):
    os.mkfifo(tmp_path / "pipe")
    (tmp_path / "s.json").symlink_to("pipe")
    doc = _finishes(lambda: read_doc(tmp_path / "s.json", tmp_path))
    assert doc.problem == "not a regular file"


def test_a_directory_is_refused_and_its_descriptor_closed(tmp_path):
    """A folder named like a session file once raised IsADirectoryError and left its descriptor open."""
    (tmp_path / "s.json").mkdir()
    open_before = len(os.listdir("/proc/self/fd"))
    with pytest.raises(UnsafeFile, match="not a regular file"):
        read_session_file(tmp_path / "s.json")
    assert read_doc(tmp_path / "s.json", tmp_path).problem == "not a regular file"
    assert len(os.listdir("/proc/self/fd")) == open_before


def test_a_device_is_refused():
    with pytest.raises(UnsafeFile, match="not a regular file"):
        read_session_file(Path(os.devnull))
    assert read_doc(Path(os.devnull), Path(os.devnull).parent).problem == "not a regular file"


def test_a_socket_is_refused(tmp_path):
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(tmp_path / "s.json"))
        with pytest.raises(UnsafeFile, match="not a regular file"):
            read_session_file(tmp_path / "s.json")
        assert read_doc(tmp_path / "s.json", tmp_path).problem == "not a regular file"


def test_a_file_over_the_size_cap_is_refused_unread(tmp_path):
    path = tmp_path / "s.json"
    with open(path, "wb") as fh:
        fh.truncate(MAX_FILE_BYTES + 1)  # sparse: nothing is written
    doc = read_doc(path, tmp_path)
    assert doc.exists and doc.data is None and doc.problem == f"larger than {MAX_FILE_BYTES} bytes"


@contextlib.contextmanager
def _unreadable_file() -> Iterator[Path]:
    """A file this process cannot open: mode 000, read as an unprivileged user when the tests run as root."""
    folder = Path(tempfile.mkdtemp(prefix="talaria-unreadable-"))
    folder.chmod(0o711)  # others may reach the file, not read it
    path = folder / "s.json"
    path.write_bytes(DOC)
    path.chmod(0)
    as_root = os.geteuid() == 0
    try:
        if as_root:
            os.setegid(65534)
            os.seteuid(65534)
        yield path
    finally:
        if as_root:
            os.seteuid(0)
            os.setegid(0)
        shutil.rmtree(folder)


def test_an_unreadable_file_is_an_error_for_the_store_and_unparsable_for_recovery():
    with _unreadable_file() as path:
        with pytest.raises(PermissionError):
            read_session_file(path)
        doc = read_doc(path, path.parent)
        no_metadata = read_metadata_prefix(path)
    assert doc.exists and doc.problem is None and doc.count == -1
    assert no_metadata is None


def test_truncated_or_corrupt_json_is_unparsable_for_recovery_and_an_error_for_the_store(state_dir):
    for sid, raw in (("truncated", DOC[: len(DOC) // 2]), ("corrupt", b"\xff\xfe{not json")):
        path = state_dir / f"{sid}.json"
        path.write_bytes(raw)
        assert read_doc(path, state_dir).count == -1
        assert read_metadata_prefix(path) is None
        with pytest.raises(ValueError):
            Session.load(sid)


def test_the_metadata_prefix_is_read_without_the_messages(tmp_path):
    path = tmp_path / "s.json"
    path.write_bytes(DOC)
    assert read_metadata_prefix(path) == {"session_id": "s", "title": "t"}

"""Whole files in and out of a session's workspace through the real server: a folder downloaded as a zip
(written as it is read, bounded, without links, FIFOs or devices, slow readers costing no request worker)
and a file uploaded into a folder (never replacing one, bounded, only into plain folders of the
workspace)."""

from __future__ import annotations

import base64
import io
import os
import shutil
import socket
import struct
import time
import zipfile
from urllib.parse import quote

import pytest

from talaria_testing.chat_client import new_session
from talaria_testing.server_proc import ServerProc
from talaria_testing.slow_readers import read_all, request_without_reading, wait_until_answers_began

pytestmark = pytest.mark.integration

BIG_FILES = 6
BIG_FILE_BYTES = 8 * 1024 * 1024  # random, so the zip is as large: 48 MB


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    root = tmp_path_factory.mktemp("transfer")
    env = {
        "TALARIA_WORKSPACE_ROOTS": str(root),
        "TALARIA_SERVER_THREADS": "1",  # one request worker: a download that held it would stall the rest
        "TALARIA_UPLOAD_MAX_BYTES": "4096",
        "TALARIA_FOLDER_DOWNLOAD_MAX_BYTES": str(BIG_FILES * BIG_FILE_BYTES + 1024 * 1024),
        "TALARIA_RESPONSE_IDLE_TIMEOUT": "60",
    }
    with ServerProc(root, env=env) as server:
        yield server
    assert "Traceback" not in server.log_text(), server.log_text()[-4000:]


@pytest.fixture
def space(srv):
    """A new session and its workspace folder, emptied of what earlier tests left."""
    sid = new_session(srv)
    for item in list(srv.workspace.iterdir()):
        if item.is_dir() and not item.is_symlink():
            shutil.rmtree(item)
        else:
            item.unlink()
    return sid, srv.workspace


def _download(srv, sid: str, path: str, extra: str = "") -> tuple[int, dict, bytes]:
    return srv.request("GET", f"/api/folder/download?session_id={sid}&path={quote(path)}{extra}", timeout=60)


def _upload(srv, sid: str, path: str, name: str, data: bytes, **more) -> tuple[int, dict]:
    body = {"session_id": sid, "path": path, "name": name, "data": base64.b64encode(data).decode(), **more}
    return srv.json("POST", "/api/file/upload", body)


def test_a_folder_downloads_as_a_zip_of_its_files_and_folders_as_an_attachment(srv, space):
    sid, workspace = space
    (workspace / "src" / "pkg").mkdir(parents=True)
    (workspace / "src" / "main.py").write_text("print('hi')\n")
    (workspace / "src" / "pkg" / "mod.py").write_text("X = 1\n")
    (workspace / "src" / "empty").mkdir()
    (workspace / "src" / ".env").write_text("SECRET=1\n")
    (workspace / "src" / "node_modules").mkdir()
    (workspace / "src" / "node_modules" / "dep.js").write_text("//\n")
    status, headers, body = _download(srv, sid, "src")
    assert status == 200
    assert headers["content-type"] == "application/zip"
    assert headers["content-disposition"] == "attachment; filename*=UTF-8''src.zip"
    assert headers["x-content-type-options"] == "nosniff"
    archive = zipfile.ZipFile(io.BytesIO(body))
    assert archive.testzip() is None
    assert sorted(archive.namelist()) == ["src/", "src/empty/", "src/main.py", "src/pkg/", "src/pkg/mod.py"]
    assert archive.read("src/pkg/mod.py") == b"X = 1\n"
    status, _, body = _download(srv, sid, "src", "&hidden=1")
    names = zipfile.ZipFile(io.BytesIO(body)).namelist()
    assert "src/.env" in names and "src/node_modules/dep.js" in names
    status, headers, body = _download(srv, sid, "")
    assert status == 200 and headers["content-disposition"].endswith(f"''{workspace.name}.zip")
    assert f"{workspace.name}/src/main.py" in zipfile.ZipFile(io.BytesIO(body)).namelist()


def test_links_fifos_and_killed_writes_in_a_downloaded_folder_are_left_out_never_followed(
    srv, space, tmp_path
):
    sid, workspace = space
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("outside the workspace")
    folder = workspace / "mixed"
    folder.mkdir()
    (folder / "plain.txt").write_text("plain")
    os.symlink(outside / "secret.txt", folder / "secret-link.txt")
    os.symlink(outside, folder / "outside-dir")
    os.symlink(folder / "plain.txt", folder / "inside-link.txt")
    os.mkfifo(folder / "pipe")
    (folder / f"plain.txt.tmp.{2**22 + 7}.0123abcd").write_text("a killed write's half")
    started = time.monotonic()
    status, _, body = _download(srv, sid, "mixed")
    assert status == 200 and time.monotonic() - started < 10  # the FIFO was never waited on
    archive = zipfile.ZipFile(io.BytesIO(body))
    assert sorted(archive.namelist()) == ["mixed/", "mixed/plain.txt"]
    assert b"outside the workspace" not in body


@pytest.mark.parametrize(
    ("path", "status"),
    [("../", 403), ("/etc", 403), ("~", 403), ("missing", 404), ("file.txt", 400), ("a\x00b", 400)],
)
def test_a_download_of_anything_but_a_folder_of_the_workspace_is_a_clear_error(srv, space, path, status):
    sid, workspace = space
    (workspace / "file.txt").write_text("x")
    answer, headers, body = _download(srv, sid, path)
    assert answer == status and headers["content-type"].startswith("application/json")
    assert b'"error"' in body


def test_a_folder_linked_from_outside_is_refused_and_an_unknown_session_is_404(srv, space, tmp_path):
    sid, workspace = space
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "x.txt").write_text("x")
    os.symlink(outside, workspace / "door")
    assert _download(srv, sid, "door")[0] == 403
    assert _download(srv, "nosuchsession", "")[0] == 404
    assert _download(srv, "../x", "")[0] == 400


def test_a_folder_over_the_size_bound_is_refused_before_any_byte_of_zip_is_sent(srv, space):
    sid, workspace = space
    big = workspace / "big"
    big.mkdir()
    for n in range(BIG_FILES + 1):  # one file more than the bound allows
        with open(big / f"part{n}.bin", "wb") as out:
            out.truncate(BIG_FILE_BYTES)
    status, headers, body = _download(srv, sid, "big")
    assert status == 413 and headers["content-type"].startswith("application/json")
    assert "MB of files" in body.decode()


def test_a_zip_the_response_spool_has_no_room_for_is_a_503_before_any_byte_of_it(tmp_path):
    with ServerProc(tmp_path, env={"TALARIA_RESPONSE_SPOOL_BYTES": str(4 * 1024 * 1024)}) as small_spool:
        sid = new_session(small_spool)
        (small_spool.workspace / "big").mkdir()
        (small_spool.workspace / "big" / "data.bin").write_bytes(os.urandom(6 * 1024 * 1024))
        (small_spool.workspace / "small").mkdir()
        (small_spool.workspace / "small" / "a.txt").write_text("a")
        status, headers, body = _download(small_spool, sid, "big")
        assert status == 503 and headers["retry-after"] and b'"error"' in body
        assert _download(small_spool, sid, "small")[0] == 200


def _peak_rss_kb(srv) -> int:
    with open(f"/proc/{srv.proc.pid}/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    raise AssertionError("no VmHWM")


def _timed_download(srv, path: str) -> tuple[float, float, bytes]:
    """Seconds to the first bytes of the answer and to its end, and the body."""
    with socket.create_connection((srv.host, srv.port), timeout=60) as sock:
        started = time.perf_counter()
        sock.sendall(f"GET {path} HTTP/1.0\r\nHost: {srv.host}:{srv.port}\r\n\r\n".encode())
        chunks = [sock.recv(65536)]
        first = time.perf_counter() - started
        while chunk := sock.recv(1 << 20):
            chunks.append(chunk)
        whole = time.perf_counter() - started
    head, _, body = b"".join(chunks).partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.0 200 ")
    return first, whole, body


def test_a_large_zip_is_sent_as_it_is_written_never_held_in_memory_nor_holding_a_worker(srv, space):
    """48 MB of incompressible files: the zip's first bytes arrive long before its last (it is sent while
    it is written), the server's peak memory does not grow with the zip (it goes through the response's
    spool: after the zip of one 8 MB file, the zip of six adds well under a third of its size), and three
    clients that read none of it leave the one request worker free once their zips are written."""
    sid, workspace = space
    big = workspace / "big"
    (big / "warm").mkdir(parents=True)
    (big / "warm" / "part0.bin").write_bytes(os.urandom(BIG_FILE_BYTES))
    for n in range(1, BIG_FILES):
        (big / f"part{n}.bin").write_bytes(os.urandom(BIG_FILE_BYTES))
    assert _download(srv, sid, "big/warm")[0] == 200  # the allocator's steady state for these chunks
    before = _peak_rss_kb(srv)
    path = f"/api/folder/download?session_id={sid}&path=big"
    stalled = [request_without_reading(srv, path) for _ in range(3)]
    try:
        assert wait_until_answers_began(stalled, timeout=60), "a zip waited for the request worker"
        # The worker writes each zip as fast as the disk gives it (the queue is first come, first
        # served, so this answer comes after the three zips are written); then it is free, however
        # little of them the clients have read.
        assert srv.request("GET", "/health", timeout=60)[0] == 200
        started = time.monotonic()
        assert srv.request("GET", "/health", timeout=5)[0] == 200
        assert srv.request("GET", f"/api/list?session_id={sid}&path=big", timeout=5)[0] == 200
        assert time.monotonic() - started < 2
    finally:
        for sock in stalled:
            sock.close()
    first, whole, body = _timed_download(srv, path)
    assert first < whole / 4, f"first bytes after {first:.2f} s of {whole:.2f} s"
    assert len(body) > BIG_FILES * BIG_FILE_BYTES
    archive = zipfile.ZipFile(io.BytesIO(body))
    assert archive.read("big/part3.bin") == (big / "part3.bin").read_bytes()
    grown_mb = (_peak_rss_kb(srv) - before) / 1024
    assert grown_mb < 16, f"peak memory grew {grown_mb:.0f} MB for a 48 MB zip"


def test_a_client_that_leaves_midway_stops_the_zip_and_frees_the_worker(srv, space):
    sid, workspace = space
    big = workspace / "big"
    big.mkdir()
    for n in range(BIG_FILES):
        (big / f"part{n}.bin").write_bytes(os.urandom(BIG_FILE_BYTES))
    with request_without_reading(srv, f"/api/folder/download?session_id={sid}&path=big") as sock:
        assert wait_until_answers_began([sock], timeout=30)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # leave with a reset
    started = time.monotonic()
    assert srv.request("GET", f"/api/list?session_id={sid}&path=big", timeout=10)[0] == 200
    assert time.monotonic() - started < 1.2, "the zip went on being written for a client that left"


def test_a_slow_reader_receives_the_whole_zip(srv, space):
    sid, workspace = space
    (workspace / "docs").mkdir()
    (workspace / "docs" / "notes.bin").write_bytes(os.urandom(3 * 1024 * 1024))
    with request_without_reading(srv, f"/api/folder/download?session_id={sid}&path=docs", 65536) as sock:
        sock.settimeout(30)
        raw, closed = read_all(sock, pause=0.005)
    head, _, body = raw.partition(b"\r\n\r\n")
    assert closed and head.startswith(b"HTTP/1.0 200 ")
    archive = zipfile.ZipFile(io.BytesIO(body))
    assert archive.read("docs/notes.bin") == (workspace / "docs" / "notes.bin").read_bytes()


# ---------------------------------------------------------------------- uploads


def test_an_upload_lands_in_its_folder_and_never_replaces_a_file(srv, space):
    sid, workspace = space
    (workspace / "docs").mkdir()
    status, stored = _upload(srv, sid, "docs", "notes.txt", b"first")
    assert status == 200 and stored == {"path": "docs/notes.txt", "name": "notes.txt", "size": 5}
    assert (workspace / "docs" / "notes.txt").read_bytes() == b"first"
    status, refused = _upload(srv, sid, "docs", "notes.txt", b"second")
    assert status == 409 and refused["exists"] is True and refused["name"] == "notes.txt"
    assert (workspace / "docs" / "notes.txt").read_bytes() == b"first"
    status, kept = _upload(srv, sid, "docs", "notes.txt", b"second", keep_both=True)
    assert status == 200 and kept["path"] == "docs/notes-1.txt"
    assert (workspace / "docs" / "notes-1.txt").read_bytes() == b"second"
    status, root = _upload(srv, sid, "", "empty.bin", b"")
    assert status == 200 and root["path"] == "empty.bin" and (workspace / "empty.bin").read_bytes() == b""
    assert sorted(os.listdir(workspace / "docs")) == ["notes-1.txt", "notes.txt"]  # no temp left


def test_an_upload_over_the_size_setting_or_with_bad_fields_is_refused_and_writes_nothing(srv, space):
    sid, workspace = space
    assert _upload(srv, sid, "", "big.bin", b"x" * 5000)[0] == 413
    for name in ("../x", "a/b", "", ".", "..", "x" * 300, 7):
        assert _upload(srv, sid, "", name, b"x")[0] == 400, name
    bad = {"session_id": sid, "path": "", "name": "a.txt", "data": "not base64!"}
    assert srv.json("POST", "/api/file/upload", bad)[0] == 400
    assert _upload(srv, sid, "", "a.txt", b"x", keep_both="yes")[0] == 400
    assert _upload(srv, sid, "missing", "a.txt", b"x")[0] == 404
    assert _upload(srv, sid, "../", "a.txt", b"x")[0] == 403
    assert os.listdir(workspace) == []


def test_an_upload_never_goes_through_a_link_out_or_into_a_file(srv, space, tmp_path):
    sid, workspace = space
    outside = tmp_path / "out"
    outside.mkdir()
    os.symlink(outside, workspace / "door")
    (workspace / "file.txt").write_text("x")
    assert _upload(srv, sid, "door", "a.txt", b"x")[0] == 403
    assert _upload(srv, sid, "file.txt", "a.txt", b"x")[0] == 400
    assert list(outside.iterdir()) == []

"""A real server process is SIGKILLed in the middle of writing a workspace file for the files panel, an
upload (``POST /api/file/upload``) or a save (``POST /api/file/save``), at each durable step of the write
(``api.store.atomic.STEP_HOOK``, set in the server process by ``talaria_testing.paused_server``). The file is
then the old one or the new one, whole, never a torn one; the listing shows no temp file, and the next
write into the folder removes the one the kill left."""

from __future__ import annotations

import base64
import threading
from urllib.parse import quote

import pytest

from api.agent import agent_memory
from talaria_testing.chat_client import new_session
from talaria_testing.paused_server import PausedServer
from talaria_testing.server_proc import ServerProc

pytestmark = pytest.mark.integration

OLD = b"old report\n" * 50_000  # ~550 KB: many writes of the kernel, so a torn file would show
NEW = b"new report, longer\n" * 45_000  # under the 1 MB an edit may hold


def _write_in_background(srv: ServerProc, route: str, body: dict) -> threading.Thread:
    """Send the write; the server never answers it (it is killed), so the client's error is expected."""

    def send() -> None:
        try:
            srv.request("POST", route, body, timeout=30)
        except OSError:
            pass

    thread = threading.Thread(target=send, daemon=True)
    thread.start()
    return thread


def _temps(folder) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if ".tmp." in p.name)


def _killed_at(tmp_path, step: str, write) -> tuple[ServerProc, str]:
    """Start a server that stops at ``step`` of the write of ``docs/report.txt``, make the write, kill the
    server there; the server (stopped) and the session id."""
    srv = PausedServer(tmp_path, step=step, name="report.txt")
    srv.start()
    try:
        sid = new_session(srv)
        (srv.workspace / "docs").mkdir()
        sender = write(srv, sid)
        assert srv.wait_paused().startswith("report.txt")
    finally:
        srv.kill()
    sender.join(30)
    return srv, sid


def _listed_names(srv: ServerProc, sid: str) -> list[str]:
    status, listing = srv.json("GET", f"/api/list?session_id={sid}&path=docs&hidden=1")
    assert status == 200
    return [entry["name"] for entry in listing["entries"]]


@pytest.mark.parametrize("step", ["tmp_created", "tmp_written", "tmp_fsynced", "linked"])
def test_an_upload_killed_at_any_step_leaves_no_file_or_the_whole_new_one(tmp_path, step):
    def upload(srv, sid):
        body = {
            "session_id": sid,
            "path": "docs",
            "name": "report.txt",
            "data": base64.b64encode(NEW).decode(),
        }
        return _write_in_background(srv, "/api/file/upload", body)

    killed, sid = _killed_at(tmp_path, step, upload)
    target = killed.workspace / "docs" / "report.txt"
    assert not target.exists() or target.read_bytes() == NEW
    left = _temps(target.parent)
    assert left, "the kill left the upload's temp file (the sweep has something to do)"
    with ServerProc(tmp_path) as srv:
        assert _listed_names(srv, sid) == (["report.txt"] if target.exists() else [])
        again = {
            "session_id": sid,
            "path": "docs",
            "name": "next.txt",
            "data": base64.b64encode(b"x").decode(),
        }
        assert srv.json("POST", "/api/file/upload", again)[0] == 200
        assert _temps(target.parent) == []
        assert sorted(_listed_names(srv, sid)) == sorted(
            ["next.txt"] + (["report.txt"] if target.exists() else [])
        )


@pytest.mark.parametrize("step", ["tmp_created", "tmp_written", "tmp_fsynced", "replaced"])
def test_a_save_killed_at_any_step_leaves_the_whole_old_file_or_the_whole_new_one(tmp_path, step):
    def save(srv, sid):
        target = srv.workspace / "docs" / "report.txt"
        target.write_bytes(OLD)
        body = {
            "session_id": sid,
            "path": "docs/report.txt",
            "content": NEW.decode(),
            "base_version": agent_memory.version_of(OLD),
        }
        return _write_in_background(srv, "/api/file/save", body)

    killed, sid = _killed_at(tmp_path, step, save)
    target = killed.workspace / "docs" / "report.txt"
    assert target.read_bytes() in (OLD, NEW)
    if step == "replaced":
        assert target.read_bytes() == NEW
    else:
        assert target.read_bytes() == OLD and _temps(target.parent)
    with ServerProc(tmp_path) as srv:
        assert _listed_names(srv, sid) == ["report.txt"]
        status, opened = srv.json("GET", f"/api/file?session_id={sid}&path={quote('docs/report.txt')}")
        assert status == 200 and opened["content"].encode() == target.read_bytes()
        body = {
            "session_id": sid,
            "path": "docs/report.txt",
            "content": "third",
            "base_version": opened["version"],
        }
        assert srv.json("POST", "/api/file/save", body)[0] == 200
        assert _temps(target.parent) == []
        assert target.read_bytes() == b"third"

"""Attachments: stored in the session's workspace under a safe name; hostile input writes nothing."""

from __future__ import annotations

import base64
import os
import time

import pytest

from api.rules.errors import BadRequest, Forbidden, PayloadTooLarge, UnsupportedMediaType
from api.services import attachments
from api.store import atomic, config
from api.store.models import Session
from talaria_testing.racers import racing
from talaria_testing.server_proc import ServerProc

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 40


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


@pytest.fixture
def workspace(state_dir, tmp_path):
    folder = tmp_path / "ws"
    folder.mkdir()
    Session(session_id="att", workspace=str(folder)).save()
    return folder


def files_under(root) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("chart.png", "chart.png"),
        ("../../etc/passwd", "passwd"),
        ("..\\..\\win.ini", "win.ini"),
        (".bashrc", "bashrc"),
        ("a\x00b\nc.txt", "abc.txt"),
        ("rapport final (v2).csv", "rapport final _v2.csv"),
        ("..", "attachment"),
        ("", "attachment"),
        ("x" * 300 + ".txt", "x" * 96 + ".txt"),
        ("ｆｕｌｌ.txt", "full.txt"),
    ],
)
def test_names_are_made_safe(name, expected):
    assert attachments.safe_name(name) == expected


def test_an_image_is_stored_in_the_uploads_folder_and_never_overwrites(workspace):
    first = attachments.store_attachment("att", "chart.png", b64(PNG))
    second = attachments.store_attachment("att", "chart.png", b64(PNG))
    assert first == {
        "path": "uploads/chart.png",
        "name": "chart.png",
        "kind": "image",
        "content_type": "image/png",
        "size": len(PNG),
    }
    assert second["path"] == "uploads/chart-1.png"
    assert (workspace / "uploads" / "chart.png").read_bytes() == PNG


def test_a_text_file_is_a_file_attachment(workspace):
    stored = attachments.store_attachment("att", "notes.md", b64(b"# Notes\n"))
    assert stored["kind"] == "file" and stored["path"] == "uploads/notes.md"


@pytest.mark.parametrize(
    ("name", "data", "error"),
    [
        ("evil.exe", b"MZ\x90\x00", UnsupportedMediaType),
        ("fake.png", b"<svg onload=alert(1)>", UnsupportedMediaType),
        ("image.svg", b"<svg/>", UnsupportedMediaType),
        ("doc.pdf", b"not a pdf", UnsupportedMediaType),
        ("latin.txt", "café".encode("latin-1"), UnsupportedMediaType),
        ("noext", b"hello", UnsupportedMediaType),
    ],
)
def test_wrong_types_are_refused_and_write_nothing(workspace, name, data, error):
    with pytest.raises(error):
        attachments.store_attachment("att", name, b64(data))
    assert files_under(workspace) <= {"uploads"}


@pytest.mark.parametrize("data", [None, 42, "not base64!!", ""])
def test_bad_data_is_a_400(workspace, data):
    with pytest.raises(BadRequest):
        attachments.store_attachment("att", "a.txt", data)


def test_a_file_over_the_size_limit_is_refused(workspace, monkeypatch):
    monkeypatch.setitem(config.SETTINGS_VALUES, "attachment_max_bytes", 16)
    with pytest.raises(PayloadTooLarge):
        attachments.store_attachment("att", "chart.png", b64(PNG))
    assert not (workspace / "uploads" / "chart.png").exists()


def test_an_uploads_link_out_of_the_workspace_is_refused(workspace, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    os.symlink(outside, workspace / "uploads")
    with pytest.raises(Forbidden):
        attachments.store_attachment("att", "chart.png", b64(PNG))
    assert list(outside.iterdir()) == []


def test_an_uploads_folder_replaced_while_written_takes_the_upload_in_the_folder_there_now(
    workspace, monkeypatch
):
    """Another process renamed a folder over the (empty) uploads folder after it was opened: writing into
    the removed folder failed with FileNotFoundError, a 500. The upload now lands in the folder the
    name holds, beside what that folder kept."""
    other = workspace / "other"
    other.mkdir()
    (other / "kept.txt").write_text("kept")
    sweep = atomic.sweep_once

    def replace_then_sweep(folder, folder_fd, swept=None):
        if other.exists():
            os.rename(other, workspace / "uploads")
        sweep(folder, folder_fd, swept)

    monkeypatch.setattr(atomic, "sweep_once", replace_then_sweep)
    stored = attachments.store_attachment("att", "chart.png", b64(PNG))
    assert (workspace / stored["path"]).read_bytes() == PNG
    assert (workspace / "uploads" / "kept.txt").read_text() == "kept"


def test_a_message_names_its_attachments_by_path(workspace):
    stored = attachments.store_attachment("att", "chart.png", b64(PNG))
    named = attachments.message_attachments("att", [stored["path"]])
    assert named == [{"path": "uploads/chart.png", "name": "chart.png", "kind": "image"}]
    assert (
        attachments.agent_text("Look", named)
        == "Look\n\n[Attached image: uploads/chart.png (in the workspace)]"
    )


@pytest.mark.parametrize(
    ("paths", "error"),
    [("x", BadRequest), (["../x.png"], Forbidden), (["missing.png"], BadRequest), (["a"] * 11, BadRequest)],
)
def test_a_message_cannot_name_files_outside_or_missing(workspace, paths, error):
    with pytest.raises(error):
        attachments.message_attachments("att", paths)


def _attach(srv: ServerProc, sid: str, name: str, data: bytes) -> tuple[int, dict]:
    return srv.json("POST", "/api/session/attach", {"session_id": sid, "name": name, "data": b64(data)})


def test_an_upload_never_replaces_a_file_another_process_creates_meanwhile(tmp_path):
    """ "Never overwrite" was an ``exists()`` check before ``os.replace``: against another process creating
    files in ``uploads/``, some of its files were replaced by uploads. Here a real second process watches
    for an upload's temp file and at once creates the names that upload may take, while 30 uploads of
    1 MB arrive: every file it made keeps its content and every upload lands whole under its own name."""
    with ServerProc(tmp_path) as srv:
        sid = srv.post_json("/api/session/new", {})["session"]["session_id"]
        assert _attach(srv, sid, "report.txt", b"UPLOADED first")[0] == 200
        uploads = srv.workspace / "uploads"
        landed: dict[str, bytes] = {}
        with racing("claim", uploads, 60) as racer:
            time.sleep(0.5)  # the racer has started
            for n in range(30):
                content = f"UPLOADED {n}\n".encode() * (1024 * 1024 // 12)
                status, body = _attach(srv, sid, "report.txt", content)
                assert status == 200, body
                landed[body["attachment"]["name"]] = content
            racer.proc.kill()
            racer.proc.wait(10)
        theirs = racer.output.split()
        assert {name: (uploads / name).read_bytes() for name in theirs} == {n: n.encode() for n in theirs}
        assert {name: (uploads / name).read_bytes() for name in landed} == landed
        assert not [p.name for p in uploads.iterdir() if ".tmp." in p.name]


def test_an_uploads_folder_swapped_for_a_link_never_carries_a_write_outside(tmp_path):
    """The uploads folder was checked (not a link, inside the workspace) and then written by path: another
    process swapping it for a link to a folder outside between the two carried the upload there. Here a
    real second process swaps it back and forth while 30 uploads arrive: each is stored inside the
    workspace or refused, and nothing is written outside."""
    outside = tmp_path / "outside"
    outside.mkdir()
    with ServerProc(tmp_path / "srv") as srv:
        sid = srv.post_json("/api/session/new", {})["session"]["session_id"]
        assert _attach(srv, sid, "note.txt", b"first")[0] == 200
        uploads = srv.workspace / "uploads"
        stored, statuses = [], []
        with racing("relink", uploads, outside, 30) as racer:
            deadline = time.monotonic() + 10
            while not uploads.is_symlink() and time.monotonic() < deadline:
                time.sleep(0.001)  # the racer has started
            for n in range(30):
                status, body = _attach(srv, sid, "note.txt", f"UPLOADED {n}\n".encode() * 80_000)
                statuses.append(status)
                if status == 200:
                    stored.append(body["attachment"]["name"])
            racer.proc.kill()
            racer.proc.wait(10)
        assert list(outside.iterdir()) == []
        assert set(statuses) <= {200, 403}
        folders = [p for p in srv.workspace.iterdir() if p.name.startswith("uploads") and not p.is_symlink()]
        assert all(any((folder / name).is_file() for folder in folders) for name in stored)

"""Attachments: stored in the session's workspace under a safe name; hostile input writes nothing."""

from __future__ import annotations

import base64
import os

import pytest

from api import attachments, config
from api.errors import BadRequest, Forbidden, PayloadTooLarge, UnsupportedMediaType
from api.models import Session

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

"""Workspace files for the page: the path stays inside the workspace, only real images are served."""

from __future__ import annotations

import os
import threading
import time

import pytest

from api.rules.errors import BadRequest, Forbidden, NotFound, PayloadTooLarge, UnsupportedMediaType
from api.services import media
from api.store import config
from api.store.models import Session
from talaria_testing.racers import racing
from talaria_testing.server_proc import ServerProc

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 32
JPEG = b"\xff\xd8\xff\xe0" + b"\x00" * 32
GIF = b"GIF89a" + b"\x00" * 32
WEBP = b"RIFF\x00\x00\x00\x00WEBPVP8 " + b"\x00" * 16


@pytest.fixture
def workspace(state_dir, tmp_path):
    folder = tmp_path / "ws"
    (folder / "out").mkdir(parents=True)
    (folder / "out" / "chart.png").write_bytes(PNG)
    (folder / "notes.txt").write_text("not an image")
    (folder / "evil.svg").write_text("<svg onload='alert(1)'/>")
    (tmp_path / "secret.png").write_bytes(PNG)
    os.symlink(tmp_path / "secret.png", folder / "link.png")
    Session(session_id="media", workspace=str(folder)).save()
    return folder


@pytest.mark.parametrize(
    ("head", "expected"),
    [
        (PNG, "image/png"),
        (JPEG, "image/jpeg"),
        (GIF, "image/gif"),
        (WEBP, "image/webp"),
        (b"<svg", None),
        (b"", None),
    ],
)
def test_image_type_is_read_from_the_bytes(head, expected):
    assert media.image_type(head[:16]) == expected


def test_an_image_in_the_workspace_is_served_with_its_type(workspace):
    assert media.read_media("media", "out/chart.png") == (PNG, "image/png")
    assert media.read_media("media", "./out/../out/chart.png") == (PNG, "image/png")


@pytest.mark.parametrize(
    ("path", "error"),
    [
        ("../secret.png", Forbidden),
        ("out/../../secret.png", Forbidden),
        ("link.png", Forbidden),  # a symlink that points out of the workspace
        ("/etc/passwd", Forbidden),
        ("~/x.png", Forbidden),
        ("a\x00b.png", BadRequest),
        ("", BadRequest),
        (None, BadRequest),
        (["x"], BadRequest),
        ("x" * 5000, BadRequest),
        ("missing.png", NotFound),
        ("out", NotFound),
        ("notes.txt", UnsupportedMediaType),
        ("evil.svg", UnsupportedMediaType),
    ],
)
def test_hostile_or_wrong_paths_are_refused(workspace, path, error):
    with pytest.raises(error):
        media.read_media("media", path)


def test_an_image_over_the_size_limit_is_refused(workspace, monkeypatch):
    monkeypatch.setitem(config.SETTINGS_VALUES, "attachment_max_bytes", 10)
    with pytest.raises(PayloadTooLarge):
        media.read_media("media", "out/chart.png")


def test_an_unknown_session_or_one_whose_file_is_a_link_is_a_404(state_dir, tmp_path):
    """A link where the session file should be raised ValueError (a 500) here."""
    outside = tmp_path / "outside.json"
    outside.write_text('{"session_id": "linked", "workspace": "/"}')
    (state_dir / "linked.json").symlink_to(outside)
    for sid in ("nope", "linked"):
        with pytest.raises(NotFound):
            media.read_media(sid, "x.png")


def test_a_session_without_a_workspace_uses_the_default_one(state_dir, tmp_path, monkeypatch):
    (tmp_path / "pic.gif").write_bytes(GIF)
    monkeypatch.setitem(config.SETTINGS_VALUES, "default_workspace", str(tmp_path))
    Session(session_id="plain").save()
    assert media.read_media("plain", "pic.gif") == (GIF, "image/gif")


def test_a_fifo_or_a_larger_file_swapped_in_by_another_process_never_wedges_or_overflows(tmp_path):
    """The route checked the path with ``is_file()`` and a size, then opened it again: another process
    swapping the image for a FIFO between the two left every request worker blocked opening the FIFO (all
    routes 503 until restart), and a larger file swapped in was served past the size limit. Here a real
    second process turns the image into a FIFO and a 2 MiB file in a loop while 8 clients ask for it:
    every answer is an image within the limit or a clear error, and /health still answers."""
    limit = 1024 * 1024
    env = {"TALARIA_SERVER_THREADS": "8", "TALARIA_ATTACHMENT_MAX_BYTES": str(limit)}
    with ServerProc(tmp_path, env=env) as srv:
        sid = srv.post_json("/api/session/new", {})["session"]["session_id"]
        picture = srv.workspace / "pic.png"
        picture.write_bytes(PNG)
        answers: list[tuple[int, int]] = []
        stuck = threading.Event()

        def ask(count: int) -> None:
            for _ in range(count):
                if stuck.is_set():
                    return
                try:
                    status, _, body = srv.request(
                        "GET", f"/api/media?session_id={sid}&path=pic.png", timeout=10
                    )
                except TimeoutError:
                    stuck.set()
                    return
                answers.append((status, len(body)))

        with racing("swap", picture, 20, 2 * limit):
            deadline = time.monotonic() + 10
            while not picture.is_fifo() and time.monotonic() < deadline:
                time.sleep(0.001)  # the racer has started
            clients = [threading.Thread(target=ask, args=(60,)) for _ in range(8)]
            for client in clients:
                client.start()
            for client in clients:
                client.join(60)
        assert not stuck.is_set(), "a media request never answered"
        assert srv.request("GET", "/health", timeout=10)[0] == 200
        assert {status for status, _ in answers} <= {200, 404, 413}
        assert max(size for status, size in answers if status == 200) <= limit
        assert len(answers) == 8 * 60

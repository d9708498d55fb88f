"""The files panel of a session in an SSH environment works on that host (``api.services.remote_files``,
``remote_edit``, ``remote_writes``, ``remote_trash``): a real OpenSSH server on 127.0.0.1, the session's folder
there, and a local folder holding files of the same names that never show. Listing, preview (highlighted,
Markdown, binary, too large) and download answer as for a local session; an edit is saved there against the
version it was opened at; a new file or folder, a rename, an upload and an attachment are made there and never
replace a name; a deletion goes to a trash kept there; images are shown from there; a folder's zip is made of
its files there, within the bound of a remote download."""

from __future__ import annotations

import base64
import io
import json
import os
import shutil
import subprocess
import tempfile
import time
import zipfile
from pathlib import Path
from urllib.parse import quote

import pytest

from talaria_testing import sshd
from talaria_testing.chat_client import read_all, session
from talaria_testing.fake_llm import FakeLLM, Reply
from talaria_testing.server_proc import ServerProc
from tests.integration import test_environment_workers as environment_tests
from tests.integration.test_attachments import DATA_URL, IMAGE_LINE, PNG, _image_urls, _user_contents

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(bool(sshd.available()), reason=sshd.available() or "ok"),
]
# The SSH server of the module, and a server per test with the confirmed environment "box".
ssh = environment_tests.ssh
srv = environment_tests.srv


@pytest.fixture(scope="module")
def project(ssh):
    """The session's folder on the SSH side, with a file of each kind."""
    folder = ssh.remote_home / "project"
    (folder / "src").mkdir(parents=True)
    (folder / "src" / "app.py").write_text("def hello():\n    return 'there'\n")
    (folder / "README.md").write_text("# Remote\n\nread *there*\n")
    (folder / "blob.bin").write_bytes(b"\x00\x01\x02" * 100)
    (folder / "big.txt").write_bytes(b"x" * (1024 * 1024 + 10))
    (folder / ".env").write_text("SECRET=1\n")
    (folder / "node_modules").mkdir()
    (folder / "skipped.log").write_text("ignored\n")
    (folder / ".gitignore").write_text("*.log\n")
    subprocess.run(["git", "init", "-q", str(folder)], check=True)
    return folder


@pytest.fixture
def sid(srv, ssh, project):
    session = environment_tests._remote_session(srv)
    srv.post_json("/api/session/workspace", {"session_id": session, "workspace": "~/project"})
    return session


def get(srv: ServerProc, route: str, **query: str) -> tuple[int, dict]:
    params = "&".join(f"{k}={quote(v)}" for k, v in query.items())
    status, _, raw = srv.request("GET", f"{route}?{params}")
    return status, json.loads(raw)


def test_the_listing_shows_the_ssh_hosts_folder_and_never_a_local_file_of_the_same_name(srv, sid, ssh):
    local = srv.root / "README.md"
    local.write_text("LOCAL COPY\n")
    (srv.root / "only_here.txt").write_text("local\n")
    status, data = get(srv, "/api/list", session_id=sid)
    assert status == 200, data
    assert data["workspace"] == f"{ssh.home}/project" and data["path"] == ""
    names = [row["name"] for row in data["entries"]]
    assert names == ["src", "big.txt", "blob.bin", "README.md"]  # folders first, then by name
    assert "only_here.txt" not in names
    src = data["entries"][0]
    assert src["type"] == "dir" and src["path"] == "src" and isinstance(src["mtime"], float)
    blob = next(row for row in data["entries"] if row["name"] == "blob.bin")
    assert blob["type"] == "file" and blob["size"] == 300
    # .env, .git, .gitignore, node_modules and what .gitignore ignores wait behind the toggle
    assert data["hidden"] == 5

    status, shown = get(srv, "/api/list", session_id=sid, hidden="1")
    assert {row["name"] for row in shown["entries"]} >= {".env", ".git", "node_modules", "skipped.log"}
    assert shown["hidden"] == 0

    status, inner = get(srv, "/api/list", session_id=sid, path="src")
    assert status == 200 and inner["path"] == "src", inner
    assert inner["entries"] == [
        {**inner["entries"][0], "name": "app.py", "path": "src/app.py", "type": "file", "size": 32}
    ]
    status, _ = get(srv, "/api/list", session_id=sid, path="src/app.py")
    assert status == 400


def test_a_preview_reads_the_file_there_highlighted_rendered_or_only_its_facts(srv, sid):
    status, code = get(srv, "/api/file", session_id=sid, path="src/app.py")
    assert status == 200 and code["kind"] == "text"
    assert code["content"] == "def hello():\n    return 'there'\n"
    assert '<span class="k">def</span>' in code["highlighted"]
    assert code["editable"] is True  # saved there (test_an_edit_is_saved_on_the_host...)

    status, markdown = get(srv, "/api/file", session_id=sid, path="README.md")
    assert markdown["kind"] == "markdown" and "<em>there</em>" in markdown["html"]
    assert "LOCAL" not in markdown["content"]
    status, blob = get(srv, "/api/file", session_id=sid, path="blob.bin")
    assert blob["kind"] == "binary" and "content" not in blob and blob["size"] == 300
    status, big = get(srv, "/api/file", session_id=sid, path="big.txt")
    assert big["kind"] == "too_large" and big["size"] == 1024 * 1024 + 10 and "content" not in big
    status, missing = get(srv, "/api/file", session_id=sid, path="nope.txt")
    assert status == 404


def test_a_download_serves_the_bytes_from_there(srv, sid):
    status, headers, raw = srv.request("GET", f"/api/file/raw?session_id={sid}&path=blob.bin")
    assert status == 200 and raw == b"\x00\x01\x02" * 100
    assert headers["content-type"] == "application/octet-stream"
    status, headers, raw = srv.request("GET", f"/api/file/raw?session_id={sid}&path=src/app.py&download=1")
    assert status == 200 and raw.startswith(b"def hello")
    assert headers["content-type"].startswith("text/plain") and "attachment" in headers["content-disposition"]


def test_an_edit_is_saved_on_the_host_against_the_version_it_was_opened_at(srv, sid, project):
    opened = get(srv, "/api/file", session_id=sid, path="src/app.py")[1]
    (project / "src" / "app.py").chmod(0o640)
    saved = srv.post_json(
        "/api/file/save",
        {"session_id": sid, "path": "src/app.py", "content": "def hello():\n    return 'edited'\n",
         "base_version": opened["version"]},
    )  # fmt: skip
    assert saved["path"] == "src/app.py" and saved["size"] == 33
    assert (project / "src" / "app.py").read_text() == "def hello():\n    return 'edited'\n"
    assert (project / "src" / "app.py").stat().st_mode & 0o777 == 0o640  # its mode is kept
    assert not (srv.root / "src").exists()
    assert get(srv, "/api/file", session_id=sid, path="src/app.py")[1]["version"] == saved["version"]

    # Changed there since it was opened: refused with both texts, nothing written.
    (project / "src" / "app.py").write_text("by the agent\n")
    status, data = srv.json(
        "POST", "/api/file/save",
        {"session_id": sid, "path": "src/app.py", "content": "mine\n", "base_version": saved["version"]},
    )  # fmt: skip
    assert status == 409 and data["current"]["content"] == "by the agent\n" and data["yours"] == "mine\n"
    assert (
        data["current"]["version"] == get(srv, "/api/file", session_id=sid, path="src/app.py")[1]["version"]
    )
    assert (project / "src" / "app.py").read_text() == "by the agent\n"

    # A new file (base_version ""), with a name the shell would otherwise read; never over an existing one.
    name = "new 'file' $(x).txt"
    made = srv.post_json(
        "/api/file/save", {"session_id": sid, "path": name, "content": "", "base_version": ""}
    )
    assert made["size"] == 0 and (project / name).read_bytes() == b""
    status, data = srv.json(
        "POST", "/api/file/save", {"session_id": sid, "path": name, "content": "x", "base_version": ""}
    )
    assert status == 409 and data["current"] == {"content": "", "version": made["version"]}
    for path in ("../escaped.txt", "/tmp/escaped.txt", "~/escaped.txt", "src"):
        status, data = srv.json(
            "POST", "/api/file/save", {"session_id": sid, "path": path, "content": "x", "base_version": ""}
        )
        assert status in (403, 409), (path, data)
    assert not (project.parent / "escaped.txt").exists()
    (project / name).unlink()
    (project / "src" / "app.py").write_text("def hello():\n    return 'there'\n")  # as the module made it


def _post(srv: ServerProc, route: str, sid: str, **body) -> tuple[int, dict]:
    return srv.json("POST", route, {"session_id": sid, **body})


def test_create_and_rename_act_on_the_host_and_never_replace_a_name(srv, sid, project):
    assert _post(srv, "/api/file/create", sid, path="notes.txt", kind="file") == (
        200,
        {"path": "notes.txt", "type": "file"},
    )
    assert (project / "notes.txt").read_bytes() == b""
    assert _post(srv, "/api/file/create", sid, path="docs", kind="dir")[0] == 200
    assert (project / "docs").is_dir()
    for path, kind in (("notes.txt", "file"), ("notes.txt", "dir"), ("src", "file")):
        status, data = _post(srv, "/api/file/create", sid, path=path, kind=kind)
        assert status == 409 and "already exists" in data["error"], (path, data)
    assert _post(srv, "/api/file/create", sid, path="gone/x.txt", kind="file")[0] == 404
    (project / "fifo").unlink(missing_ok=True)
    os.mkfifo(project / "fifo")  # a FIFO's name is taken: refused without being opened
    assert _post(srv, "/api/file/create", sid, path="fifo", kind="file")[0] == 409
    (project / "fifo").unlink()

    assert _post(srv, "/api/file/rename", sid, path="notes.txt", new_path="docs/notes.md") == (
        200,
        {"path": "docs/notes.md"},
    )
    assert (project / "docs" / "notes.md").exists() and not (project / "notes.txt").exists()
    status, data = _post(srv, "/api/file/rename", sid, path="docs/notes.md", new_path="README.md")
    assert status == 409 and (project / "README.md").read_text().startswith("# Remote")
    assert _post(srv, "/api/file/rename", sid, path="docs", new_path="docs/inner")[0] == 400
    assert _post(srv, "/api/file/rename", sid, path=".", new_path="elsewhere")[0] == 403
    for bad in ("../escaped", "/tmp/escaped", "~/escaped"):
        assert _post(srv, "/api/file/rename", sid, path="docs", new_path=bad)[0] == 403, bad
        assert _post(srv, "/api/file/create", sid, path=bad, kind="file")[0] == 403, bad
    name = "it's $(x) done.md"
    assert _post(srv, "/api/file/rename", sid, path="docs/notes.md", new_path=name)[1] == {"path": name}
    assert (project / name).exists()
    assert not (project.parent / "escaped").exists() and not (srv.root / "notes.txt").exists()
    (project / name).unlink()
    (project / "docs").rmdir()


def test_a_deletion_goes_to_a_trash_on_the_host_and_comes_back_unless_its_place_was_taken(
    srv, sid, ssh, project
):
    (project / "draft.txt").write_text("first\n")
    (project / "old").mkdir()
    (project / "old" / "a.txt").write_text("a\n")
    first = _post(srv, "/api/file/delete", sid, path="draft.txt")[1]
    second = _post(srv, "/api/file/delete", sid, path="old")[1]
    assert first["path"] == "draft.txt" and second["path"] == "old"
    assert not (project / "draft.txt").exists() and not (project / "old").exists()
    held = ssh.remote_home / ".local/share/talaria/trash" / sid
    assert (held / first["trash_id"] / "item").read_text() == "first\n"  # kept on the host, not here
    assert not (srv.root / "trash").exists() or not any((srv.root / "trash").rglob("*"))
    status, listed = get(srv, "/api/trash", session_id=sid)
    assert [item["path"] for item in listed["items"]] == ["old", "draft.txt"]  # newest first

    (project / "draft.txt").write_text("taken\n")
    status, data = _post(srv, "/api/trash/restore", sid, trash_id=first["trash_id"])
    assert status == 409 and (project / "draft.txt").read_text() == "taken\n"
    (project / "draft.txt").unlink()
    assert _post(srv, "/api/trash/restore", sid, trash_id=first["trash_id"]) == (200, {"path": "draft.txt"})
    assert (project / "draft.txt").read_text() == "first\n"
    for bad in ("../x", "nope", 7):
        assert _post(srv, "/api/trash/restore", sid, trash_id=bad)[0] in (400, 404), bad
    assert _post(srv, "/api/file/delete", sid, path=".")[0] == 403
    assert _post(srv, "/api/file/delete", sid, path="../project")[0] == 403
    assert _post(srv, "/api/trash/empty", sid) == (200, {"emptied": 1})
    assert get(srv, "/api/trash", session_id=sid)[1] == {"items": []} and not held.exists()
    (project / "draft.txt").unlink()


def test_uploads_attachments_and_images_are_written_and_read_on_the_host(srv, sid, project):
    body = {"name": "data.csv", "data": base64.b64encode(b"a,b\n1,2\n").decode(), "path": "src"}
    assert _post(srv, "/api/file/upload", sid, **body)[1] == {
        "path": "src/data.csv",
        "name": "data.csv",
        "size": 8,
    }
    assert (project / "src" / "data.csv").read_bytes() == b"a,b\n1,2\n"
    status, data = _post(
        srv, "/api/file/upload", sid, **{**body, "data": base64.b64encode(b"other").decode()}
    )
    assert status == 409 and data["exists"] is True
    assert (project / "src" / "data.csv").read_bytes() == b"a,b\n1,2\n"  # never replaced
    kept = _post(srv, "/api/file/upload", sid, **body, keep_both=True)[1]
    assert kept["path"] == "src/data-1.csv" and (project / "src" / "data-1.csv").exists()
    hostile = (
        "-n 'q' $(touch pwned).txt"  # a name the shell would read, and one ``ln`` would take for an option
    )
    assert _post(srv, "/api/file/upload", sid, **{**body, "name": hostile})[1]["path"] == f"src/{hostile}"
    assert (project / "src" / hostile).read_bytes() == b"a,b\n1,2\n" and not list(project.rglob("pwned"))
    (project / "src" / hostile).unlink()
    assert _post(srv, "/api/file/upload", sid, **{**body, "path": "nowhere"})[0] == 404
    assert _post(srv, "/api/file/upload", sid, **{**body, "path": "../.."})[0] == 403
    assert not list(project.rglob(".talaria-upload.*"))  # no temp file left behind

    attached = srv.post_json(
        "/api/session/attach", {"session_id": sid, "name": "dot.png", "data": base64.b64encode(PNG).decode()}
    )["attachment"]
    assert attached == {
        "path": "uploads/dot.png", "name": "dot.png", "kind": "image", "content_type": "image/png", "size": len(PNG)
    }  # fmt: skip
    assert (project / "uploads" / "dot.png").read_bytes() == PNG and not (srv.root / "uploads").exists()
    again = srv.post_json(
        "/api/session/attach", {"session_id": sid, "name": "dot.png", "data": base64.b64encode(PNG).decode()}
    )["attachment"]
    assert again["path"] == "uploads/dot-1.png"
    status, headers, raw = srv.request("GET", f"/api/media?session_id={sid}&path=uploads/dot.png")
    assert status == 200 and raw == PNG and headers["content-type"] == "image/png"
    status, _, raw = srv.request("GET", f"/api/media?session_id={sid}&path=src/app.py")
    assert status == 415
    status, _, raw = srv.request("GET", f"/api/media?session_id={sid}&path=../../etc/passwd")
    assert status == 403
    for path in ("uploads/dot.png", "uploads/dot-1.png", "src/data.csv", "src/data-1.csv"):
        (project / path).unlink()
    (project / "uploads").rmdir()


def test_a_folder_is_downloaded_as_a_zip_of_its_files_there_within_the_remote_bound(srv, sid, project):
    (project / "src" / "deep").mkdir()
    (project / "src" / "deep" / "inner.txt").write_text("inner\n")
    (project / "src" / ".hidden").write_text("h\n")
    (project / "src" / "link").symlink_to("/etc/passwd")
    status, headers, raw = srv.request("GET", f"/api/folder/download?session_id={sid}&path=src")
    assert status == 200, raw[:300]
    assert headers["content-type"] == "application/zip" and "src.zip" in headers["content-disposition"]
    with zipfile.ZipFile(io.BytesIO(raw)) as archive:
        names = sorted(archive.namelist())
        assert names == ["src/", "src/app.py", "src/deep/", "src/deep/inner.txt"]  # no link, no hidden file
        assert archive.read("src/app.py") == (project / "src" / "app.py").read_bytes()
    status, _, raw = srv.request("GET", f"/api/folder/download?session_id={sid}&path=src&hidden=1")
    with zipfile.ZipFile(io.BytesIO(raw)) as archive:
        assert "src/.hidden" in archive.namelist() and "src/link" not in archive.namelist()

    # Past the bound of a remote download: refused before a byte of the zip is sent.
    with open(project / "src" / "sparse.bin", "wb") as sparse:
        sparse.truncate(17 * 1024 * 1024)
    status, data = srv.json("GET", f"/api/folder/download?session_id={sid}&path=src")
    assert status == 413 and "16 MB" in data["error"], data
    for path, expected in (("../..", 403), ("src/app.py", 400), ("nothing", 404)):
        status, data = srv.json("GET", f"/api/folder/download?session_id={sid}&path={path}")
        assert status == expected, (path, data)
    (project / "src" / "sparse.bin").unlink()
    (project / "src" / "link").unlink()
    (project / "src" / ".hidden").unlink()
    shutil.rmtree(project / "src" / "deep")


def test_an_image_attached_in_a_remote_session_reaches_a_model_that_sees_from_the_host(
    ssh, project, tmp_path
):
    """The image is kept on the host; the turn sends a copy read from there and removes the copy when it ends
    (in the system's temp folder: a longer one would not hold the SSH connection's socket)."""
    copies = Path(tempfile.gettempdir())
    before = set(copies.glob("talaria-images-*"))
    with (
        FakeLLM(vision_models=("fake-model",)) as seeing,
        environment_tests._server(tmp_path / "srv", seeing.base_url, ssh) as server,
    ):
        server.post_json("/api/environments", ssh.definition("box"))
        server.post_json("/api/environments/confirm", {"name": "box"})
        sid = environment_tests._remote_session(server)
        server.post_json("/api/session/workspace", {"session_id": sid, "workspace": "~/project"})
        image = server.post_json(
            "/api/session/attach",
            {"session_id": sid, "name": "dot.png", "data": base64.b64encode(PNG).decode()},
        )["attachment"]
        assert (project / image["path"]).read_bytes() == PNG
        seeing.script(Reply(text="A single dot."))
        started = server.post_json(
            "/api/chat/start", {"session_id": sid, "message": "What is this?", "attachments": [image["path"]]}
        )
        read_all(server, started["stream_id"])
        assert session(server, sid)["messages"][-1]["content"] == "A single dot."
        final_user = _user_contents(seeing)[-1]
        assert _image_urls([final_user]) == [DATA_URL]
        assert IMAGE_LINE in final_user[0]["text"]
        # The copy made for the turn is gone once the turn has finished (just after its last event).
        deadline = time.monotonic() + 10
        while set(copies.glob("talaria-images-*")) - before and time.monotonic() < deadline:
            time.sleep(0.05)
        assert set(copies.glob("talaria-images-*")) <= before
        status, data = server.json(
            "POST",
            "/api/chat/start",
            {"session_id": sid, "message": "And this?", "attachments": ["nowhere.png"]},
        )
        assert status == 404, data
    (project / image["path"]).unlink()
    (project / "uploads").rmdir()

"""The files panel of a session in an SSH environment reads that host (``api.services.remote_files``): a real
OpenSSH server on 127.0.0.1, the session's folder there, and a local folder holding files of the same
names that never show. Listing, preview (highlighted, Markdown, binary, too large) and download answer
as for a local session; an edit is saved there against the version it was opened at; other writes are
refused with why."""

from __future__ import annotations

import json
import subprocess
from urllib.parse import quote

import pytest

from talaria_testing import sshd
from talaria_testing.server_proc import ServerProc
from tests.integration import test_environment_workers as environment_tests

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


def test_other_writes_and_each_turns_changes_are_refused_with_why(srv, sid, project):
    for method, path, body in (
        ("POST", "/api/file/create", {"path": "new.txt", "kind": "file"}),
        ("POST", "/api/file/delete", {"path": "README.md"}),
        ("GET", f"/api/rollback/turns?session_id={sid}", None),
    ):
        status, data = srv.json(method, path, None if body is None else {"session_id": sid, **body})
        assert status == 409, (path, data)
        assert "only on this machine's folders" in data["error"] and data["environment"] == "box"
    assert (project / "README.md").read_text().startswith("# Remote")
    assert not (project / "new.txt").exists()

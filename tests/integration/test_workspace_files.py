"""The files panel's routes through the real server: a session's workspace listed, previewed, downloaded,
edited against the version it was opened at, and changed (create, rename, delete into a trash and back);
nothing outside the workspace is read or written, links out are shown and not followed, FIFOs and devices
are refused without waiting on them."""

from __future__ import annotations

import os
import shutil
import subprocess
from urllib.parse import quote

import pytest

from talaria_testing.chat_client import new_session
from talaria_testing.server_proc import ServerProc

pytestmark = pytest.mark.integration

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 32


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    root = tmp_path_factory.mktemp("files")
    with ServerProc(root, env={"TALARIA_WORKSPACE_ROOTS": str(root)}) as server:
        yield server


@pytest.fixture
def space(srv):
    """A new session and its workspace folder (the server's own, emptied of what earlier tests left)."""
    sid = new_session(srv)
    workspace = srv.workspace
    for item in list(workspace.iterdir()):
        if item.is_dir() and not item.is_symlink():
            shutil.rmtree(item)
        else:
            item.unlink()
    return sid, workspace


def _get(srv, route: str, sid: str, path: str, extra: str = "") -> tuple[int, dict]:
    return srv.json("GET", f"{route}?session_id={sid}&path={quote(path)}{extra}")


def test_a_folder_of_ten_thousand_entries_is_listed_whole_folders_first_hidden_behind_a_toggle(srv, space):
    sid, workspace = space
    big = workspace / "big"
    big.mkdir()
    for i in range(10_000):
        (big / f"f{i:05}.txt").touch()
    (big / "sub").mkdir()
    (big / ".secret").touch()
    status, listing = _get(srv, "/api/list", sid, "big")
    assert status == 200 and listing["path"] == "big" and not listing["truncated"]
    assert len(listing["entries"]) == 10_001 and listing["hidden"] == 1
    assert listing["entries"][0] == {
        "name": "sub",
        "path": "big/sub",
        "type": "dir",
        "mtime": listing["entries"][0]["mtime"],
    }
    status, shown = _get(srv, "/api/list", sid, "big", "&hidden=1")
    assert ".secret" in {row["name"] for row in shown["entries"]}


def test_in_a_git_repository_what_gitignore_ignores_is_behind_the_hidden_toggle(srv, space):
    """The toggle hid dotfiles and a fixed list of folders only: a repository's build output and logs,
    ignored by its .gitignore, filled the tree. What git ignores is hidden now (a file tracked before it
    was ignored stays shown, as git shows it), counted, and listed with hidden=1."""
    sid, workspace = space
    subprocess.run(["git", "init", "-q", str(workspace)], check=True)
    (workspace / ".gitignore").write_text("build/\n*.log\n")
    (workspace / "build").mkdir()
    (workspace / "build" / "out.bin").write_bytes(b"x")
    (workspace / "app.log").write_text("log\n")
    (workspace / "kept.log").write_text("tracked\n")
    (workspace / "main.py").write_text("print(1)\n")
    subprocess.run(["git", "-C", str(workspace), "add", "-f", "kept.log"], check=True)
    status, listing = _get(srv, "/api/list", sid, "")
    assert status == 200
    assert [row["name"] for row in listing["entries"]] == ["kept.log", "main.py"]
    assert listing["hidden"] == 4  # .git, .gitignore, build, app.log
    status, shown = _get(srv, "/api/list", sid, "", "&hidden=1")
    assert {"build", "app.log", ".gitignore"} <= {row["name"] for row in shown["entries"]}
    status, inside = _get(srv, "/api/list", sid, "build")
    assert status == 200 and inside["entries"] == [] and inside["hidden"] == 1


def test_each_kind_of_file_has_its_preview(srv, space):
    sid, workspace = space
    (workspace / "main.py").write_text("def answer():\n    return 42\n")
    (workspace / "notes.md").write_text("# Title\n\n**bold** <script>alert(1)</script>\n")
    (workspace / "table.csv").write_text("name,age\nAda,36\n")
    (workspace / "pixel.png").write_bytes(PNG)
    (workspace / "blob.bin").write_bytes(b"\x00\x01\x02" * 100)
    (workspace / "huge.txt").write_bytes(b"x" * (1024 * 1024 + 1))
    code = _get(srv, "/api/file", sid, "main.py")[1]
    assert code["kind"] == "text" and '<span class="k">def</span>' in code["highlighted"] and code["version"]
    markdown = _get(srv, "/api/file", sid, "notes.md")[1]
    assert "<strong>bold</strong>" in markdown["html"] and "<script>" not in markdown["html"]
    assert _get(srv, "/api/file", sid, "table.csv")[1]["rows"] == [["name", "age"], ["Ada", "36"]]
    assert _get(srv, "/api/file", sid, "pixel.png")[1]["kind"] == "image"
    assert _get(srv, "/api/file", sid, "blob.bin")[1]["kind"] == "binary"
    huge = _get(srv, "/api/file", sid, "huge.txt")[1]
    assert huge["kind"] == "too_large" and "content" not in huge


def test_downloads_are_attachments_with_nosniff_and_html_is_never_served_as_html(srv, space):
    sid, workspace = space
    (workspace / "page.html").write_text("<script>alert(1)</script>")
    (workspace / "pixel.png").write_bytes(PNG)
    status, headers, body = srv.request("GET", f"/api/file/raw?session_id={sid}&path=page.html")
    assert status == 200 and headers["content-type"].startswith("text/plain")
    assert (
        headers["content-disposition"].startswith("attachment;")
        and headers["x-content-type-options"] == "nosniff"
    )
    assert "sandbox" in headers["content-security-policy"]
    status, headers, body = srv.request("GET", f"/api/file/raw?session_id={sid}&path=pixel.png")
    assert (
        headers["content-type"] == "image/png"
        and headers["content-disposition"].startswith("inline;")
        and body == PNG
    )


@pytest.mark.parametrize("path", ["../outside.txt", "/etc/passwd", "~/x", "a/../../x", "bad\x00name"])
def test_paths_out_of_the_workspace_are_refused(srv, space, path):
    sid, _workspace = space
    status, answer = _get(srv, "/api/file", sid, path)
    assert status in (400, 403) and answer["error"]


def test_a_link_out_is_shown_not_followed_and_a_fifo_is_refused_without_waiting(srv, space, tmp_path):
    sid, workspace = space
    secret = tmp_path / "secret.txt"
    secret.write_text("not for the page")
    (workspace / "escape").symlink_to(secret)
    os.mkfifo(workspace / "pipe")
    rows = {row["name"]: row for row in _get(srv, "/api/list", sid, "")[1]["entries"]}
    assert rows["escape"]["type"] == "link" and rows["escape"]["link"] == "outside"
    assert rows["pipe"]["type"] == "special"
    status, answer = _get(srv, "/api/file", sid, "escape")
    assert status == 403 and "not for the page" not in str(answer)
    status, answer = _get(srv, "/api/file", sid, "pipe")  # would block for ever if it were opened for reading
    assert status == 403


def test_a_save_from_the_version_opened_lands_and_one_from_an_older_version_gets_both_texts(srv, space):
    sid, workspace = space
    (workspace / "app.py").write_text("print(1)\n")
    opened = _get(srv, "/api/file", sid, "app.py")[1]
    status, saved = srv.json(
        "POST",
        "/api/file/save",
        {"session_id": sid, "path": "app.py", "content": "print(2)\n", "base_version": opened["version"]},
    )
    assert status == 200 and (workspace / "app.py").read_text() == "print(2)\n"
    (workspace / "app.py").write_text("print('the agent')\n")
    status, refused = srv.json(
        "POST",
        "/api/file/save",
        {"session_id": sid, "path": "app.py", "content": "print(3)\n", "base_version": saved["version"]},
    )
    assert (
        status == 409
        and refused["current"]["content"] == "print('the agent')\n"
        and refused["yours"] == "print(3)\n"
    )
    assert (workspace / "app.py").read_text() == "print('the agent')\n"


def test_create_rename_delete_into_the_trash_and_restore(srv, space):
    sid, workspace = space

    def post(route: str, **body) -> tuple[int, dict]:
        return srv.json("POST", route, {"session_id": sid, **body})

    assert post("/api/file/create", path="src", kind="dir")[0] == 200
    assert post("/api/file/create", path="src/a.txt")[0] == 200
    assert post("/api/file/create", path="src/a.txt")[0] == 409  # never replaced
    (workspace / "src" / "a.txt").write_text("keep me")
    (workspace / "b.txt").write_text("in the way")
    assert post("/api/file/rename", path="src/a.txt", new_path="b.txt")[0] == 409
    assert post("/api/file/rename", path="src/a.txt", new_path="src/c.txt")[1] == {"path": "src/c.txt"}
    assert post("/api/file/rename", path="src", new_path="src/inner")[0] == 400
    status, deleted = post("/api/file/delete", path="src")
    assert status == 200 and not (workspace / "src").exists()
    assert srv.get_json(f"/api/trash?session_id={sid}")["items"] == [
        {"trash_id": deleted["trash_id"], "path": "src"}
    ]
    assert post("/api/trash/restore", trash_id=deleted["trash_id"])[0] == 200
    assert (workspace / "src" / "c.txt").read_text() == "keep me"
    post("/api/file/delete", path="b.txt")
    assert post("/api/trash/empty")[1] == {"emptied": 1}
    assert srv.get_json(f"/api/trash?session_id={sid}")["items"] == []
    assert post("/api/file/delete", path="")[0] in (400, 403)


def test_an_unknown_or_hostile_session_id_is_refused(srv):
    for sid in ("nope", "../../etc"):
        status, answer = srv.json("GET", f"/api/list?session_id={quote(sid)}&path=")
        assert status in (400, 404) and answer["error"]

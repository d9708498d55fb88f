"""A git workspace's status and diff against HEAD through the real server (git itself on a repository the
test makes)."""

from __future__ import annotations

import subprocess

import pytest

from talaria_testing.chat_client import new_session
from talaria_testing.server_proc import ServerProc

pytestmark = pytest.mark.integration


def _git(folder, *args: str) -> None:
    subprocess.run(["git", "-C", str(folder), *args], check=True, capture_output=True)


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    root = tmp_path_factory.mktemp("git")
    with ServerProc(root, env={"TALARIA_WORKSPACE_ROOTS": str(root)}) as server:
        yield server


def test_status_and_diff_against_head(srv):
    repo = srv.workspace
    _git(repo, "init", "-q", "-b", "main")
    _git(
        repo,
        "-c",
        "user.name=t",
        "-c",
        "user.email=t@example.invalid",
        "commit",
        "-q",
        "--allow-empty",
        "-m",
        "start",
    )
    (repo / "kept.txt").write_text("one\n")
    (repo / "gone.txt").write_text("bye\n")
    _git(repo, "add", ".")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-q", "-m", "files")
    (repo / "kept.txt").write_text("two\n")
    (repo / "gone.txt").unlink()
    (repo / "new.txt").write_text("hello\n")
    sid = new_session(srv)
    state = srv.get_json(f"/api/git/status?session_id={sid}")
    assert state["branch"] == "main" and not state["truncated"]
    assert {(row["path"], row["state"]) for row in state["entries"]} == {
        ("kept.txt", "modified"),
        ("gone.txt", "deleted"),
        ("new.txt", "new"),
    }
    one = srv.get_json(f"/api/git/diff?session_id={sid}&path=kept.txt")["diff"]
    assert "-one" in one and "+two" in one and "gone.txt" not in one
    everything = srv.get_json(f"/api/git/diff?session_id={sid}")["diff"]
    assert "gone.txt" in everything and "kept.txt" in everything
    status, refused = srv.json("GET", f"/api/git/diff?session_id={sid}&path=../x")
    assert status == 403 and refused["error"]


def test_a_workspace_that_is_no_repository_says_so(tmp_path):
    with ServerProc(tmp_path, env={"TALARIA_WORKSPACE_ROOTS": str(tmp_path)}) as server:
        sid = new_session(server)
        status, answer = server.json("GET", f"/api/git/status?session_id={sid}")
        assert status == 404 and "not a git repository" in answer["error"]

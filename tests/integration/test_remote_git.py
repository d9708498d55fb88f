"""The changes view of a session in an SSH environment (``api.services.remote_git``): ``git status`` and the
diff against HEAD of a repository on that host, while a repository of the same name on this machine is
never read."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from urllib.parse import quote

import pytest

from talaria_testing import sshd
from tests.integration.test_environment_workers import _remote_session, _server

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(bool(sshd.available()), reason=sshd.available() or "ok"),
]


def _git(folder: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-C", str(folder), "-c", "user.name=t", "-c", "user.email=t@t", *args],
        check=True,
        capture_output=True,
    )


def _repo(folder: Path, text: str) -> None:
    folder.mkdir(parents=True)
    _git(folder, "init", "-q", "-b", "main")
    (folder / "app.py").write_text(text)
    (folder / "gone.txt").write_text("bye\n")
    (folder / "old name.txt").write_text("moved\n")
    _git(folder, "add", "-A")
    _git(folder, "commit", "-q", "-m", "first")


def test_status_and_diff_are_those_of_the_repository_on_the_ssh_host(llm, tmp_path):
    with sshd.SshServer(tmp_path / "sshd") as ssh, _server(tmp_path / "srv", llm.base_url, ssh) as srv:
        srv.post_json("/api/environments", ssh.definition("box"))
        srv.post_json("/api/environments/confirm", {"name": "box"})
        repo = ssh.remote_home / "repo"
        _repo(repo, "print('remote')\n")
        _repo(srv.root / "repo", "print('local')\n")  # same name on this machine: never read
        (srv.root / "repo" / "app.py").write_text("print('LOCAL CHANGE')\n")
        (repo / "app.py").write_text("print('remote, changed')\n")
        (repo / "gone.txt").unlink()
        (repo / "new file\nwith newline.txt").write_text("new\n")
        _git(repo, "mv", "old name.txt", "new name.txt")
        sid = _remote_session(srv)
        srv.post_json("/api/session/workspace", {"session_id": sid, "workspace": "~/repo"})

        status = srv.get_json(f"/api/git/status?session_id={sid}")
        assert status["branch"] == "main" and status["truncated"] is False
        states = {row["path"]: row["state"] for row in status["entries"]}
        assert states == {
            "app.py": "modified",
            "gone.txt": "deleted",
            "new name.txt": "renamed",
            "new file\nwith newline.txt": "new",
        }

        whole = srv.get_json(f"/api/git/diff?session_id={sid}")
        assert "+print('remote, changed')" in whole["diff"] and "-print('remote')" in whole["diff"]
        assert "LOCAL" not in whole["diff"] and "deleted file mode" in whole["diff"]
        one = srv.get_json(f"/api/git/diff?session_id={sid}&path=app.py")
        assert "app.py" in one["diff"] and "gone.txt" not in one["diff"]
        deleted = srv.get_json(f"/api/git/diff?session_id={sid}&path=gone.txt")
        assert "-bye" in deleted["diff"]
        for path in ("../repo/app.py", "/etc/passwd", "~/repo/app.py"):
            code, _, raw = srv.request("GET", f"/api/git/diff?session_id={sid}&path={quote(path)}")
            assert code == 403, (path, raw)

        (ssh.remote_home / "plain").mkdir()
        srv.post_json("/api/session/workspace", {"session_id": sid, "workspace": "~/plain"})
        code, _, raw = srv.request("GET", f"/api/git/status?session_id={sid}")
        assert code == 404 and "not a git repository" in json.loads(raw)["error"]

"""The files panel of a session in an SSH environment beside the same panel on this machine: each operation
through the server's route (client-side time of the whole request on 127.0.0.1), for a session whose folder is
on a real OpenSSH server on 127.0.0.1 (the test support's, in a private mount namespace) and for a local
session holding the same files, taken in turn. What the remote side adds is one shell script through the
environment's worker process and its SSH master connection per operation; the local session is the floor.

    .venv/bin/python bench/bench_remote_files.py              # 20 rounds
    .venv/bin/python bench/bench_remote_files.py --runs 50

Needs root (the SSH server's private mount namespace) and Debian's openssh-server.
"""

from __future__ import annotations

import base64
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import remote_fixture  # noqa: E402
from bench.remote_fixture import ok  # noqa: E402
from bench.workspace_fixture import fill_folder  # noqa: E402
from talaria_testing.server_proc import ServerProc  # noqa: E402

FOLDER_FILES = 200
PREVIEW_BYTES = 10_000
UPLOAD_BYTES = 100_000


def _fill(folder: Path) -> None:
    fill_folder(folder / "many", FOLDER_FILES)
    (folder / "page.py").write_text(("x = 1  # a line of code\n" * (PREVIEW_BYTES // 24))[:PREVIEW_BYTES])


def _operations(server: ServerProc, sid: str) -> dict[str, Callable[[], object]]:
    """One call per operation of the panel; each leaves the folder as it found it."""
    upload = base64.b64encode(os.urandom(UPLOAD_BYTES)).decode()
    opened = ok(server, "GET", f"/api/file?session_id={sid}&path=page.py")
    content = opened["content"]

    def save() -> None:
        version = ok(server, "GET", f"/api/file?session_id={sid}&path=page.py")["version"]
        body = {"session_id": sid, "path": "page.py", "content": content, "base_version": version}
        ok(server, "POST", "/api/file/save", body)

    def create_and_delete() -> None:
        ok(server, "POST", "/api/file/create", {"session_id": sid, "path": "new.txt", "kind": "file"})
        held = ok(server, "POST", "/api/file/delete", {"session_id": sid, "path": "new.txt"})
        ok(server, "POST", "/api/trash/empty", {"session_id": sid})
        assert held["path"] == "new.txt"

    def rename_there_and_back() -> None:
        ok(server, "POST", "/api/file/rename", {"session_id": sid, "path": "page.py", "new_path": "moved.py"})
        ok(server, "POST", "/api/file/rename", {"session_id": sid, "path": "moved.py", "new_path": "page.py"})

    def upload_and_delete() -> None:
        body = {"session_id": sid, "path": "", "name": "blob.bin", "data": upload}
        ok(server, "POST", "/api/file/upload", body)
        ok(server, "POST", "/api/file/delete", {"session_id": sid, "path": "blob.bin"})
        ok(server, "POST", "/api/trash/empty", {"session_id": sid})

    return {
        f"list a folder of {FOLDER_FILES} files": lambda: ok(
            server, "GET", f"/api/list?session_id={sid}&path=many"
        ),
        f"preview a {PREVIEW_BYTES // 1000} KB file": lambda: ok(
            server, "GET", f"/api/file?session_id={sid}&path=page.py"
        ),
        "open and save it": save,
        "create a file, delete it, empty the trash": create_and_delete,
        "rename there and back": rename_there_and_back,
        f"upload {UPLOAD_BYTES // 1000} KB, delete it, empty the trash": upload_and_delete,
    }


def main(argv: list[str] | None = None) -> int:
    runs = remote_fixture.runs_asked(__doc__ or "", argv)
    if runs is None:
        return 2
    lines = []
    with tempfile.TemporaryDirectory(prefix="talaria-bench-remote-") as tmp:
        root = Path(tmp)
        with remote_fixture.served(root, "todo") as (server, _llm, ssh):
            local_folder = root / "local-project"
            local_folder.mkdir()
            _fill(local_folder)
            _fill(ssh.remote_home / "project")
            local, remote = remote_fixture.sessions(server, local_folder)
            here, there = _operations(server, local), _operations(server, remote)
            lines.extend(remote_fixture.side_by_side(here, there, runs))
    print(f"{runs} rounds (one of each, in turn) after one warm-up; {os.cpu_count()} cores, shared")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())

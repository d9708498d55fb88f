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

import argparse
import base64
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.workspace_fixture import fill_folder, header, interleaved_ms, row  # noqa: E402
from talaria_testing import sshd  # noqa: E402
from talaria_testing.fake_llm import FakeLLM, agent_server  # noqa: E402
from talaria_testing.server_proc import ServerProc  # noqa: E402

FOLDER_FILES = 200
PREVIEW_BYTES = 10_000
UPLOAD_BYTES = 100_000


def _fill(folder: Path) -> None:
    fill_folder(folder / "many", FOLDER_FILES)
    (folder / "page.py").write_text(("x = 1  # a line of code\n" * (PREVIEW_BYTES // 24))[:PREVIEW_BYTES])


def _ok(server: ServerProc, method: str, url: str, body: dict[str, Any] | None = None) -> Any:
    status, data = server.json(method, url, body)
    if status != 200:
        raise RuntimeError(f"{method} {url} -> {status}: {data}")
    return data


def _operations(server: ServerProc, sid: str) -> dict[str, Callable[[], object]]:
    """One call per operation of the panel; each leaves the folder as it found it."""
    upload = base64.b64encode(os.urandom(UPLOAD_BYTES)).decode()
    opened = _ok(server, "GET", f"/api/file?session_id={sid}&path=page.py")
    content = opened["content"]

    def save() -> None:
        version = _ok(server, "GET", f"/api/file?session_id={sid}&path=page.py")["version"]
        body = {"session_id": sid, "path": "page.py", "content": content, "base_version": version}
        _ok(server, "POST", "/api/file/save", body)

    def create_and_delete() -> None:
        _ok(server, "POST", "/api/file/create", {"session_id": sid, "path": "new.txt", "kind": "file"})
        held = _ok(server, "POST", "/api/file/delete", {"session_id": sid, "path": "new.txt"})
        _ok(server, "POST", "/api/trash/empty", {"session_id": sid})
        assert held["path"] == "new.txt"

    def rename_there_and_back() -> None:
        _ok(
            server, "POST", "/api/file/rename", {"session_id": sid, "path": "page.py", "new_path": "moved.py"}
        )
        _ok(
            server, "POST", "/api/file/rename", {"session_id": sid, "path": "moved.py", "new_path": "page.py"}
        )

    def upload_and_delete() -> None:
        body = {"session_id": sid, "path": "", "name": "blob.bin", "data": upload}
        _ok(server, "POST", "/api/file/upload", body)
        _ok(server, "POST", "/api/file/delete", {"session_id": sid, "path": "blob.bin"})
        _ok(server, "POST", "/api/trash/empty", {"session_id": sid})

    return {
        f"list a folder of {FOLDER_FILES} files": lambda: _ok(
            server, "GET", f"/api/list?session_id={sid}&path=many"
        ),
        f"preview a {PREVIEW_BYTES // 1000} KB file": lambda: _ok(
            server, "GET", f"/api/file?session_id={sid}&path=page.py"
        ),
        "open and save it": save,
        "create a file, delete it, empty the trash": create_and_delete,
        "rename there and back": rename_there_and_back,
        f"upload {UPLOAD_BYTES // 1000} KB, delete it, empty the trash": upload_and_delete,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=20)
    opts = parser.parse_args(argv)
    if sshd.available():
        print(f"cannot run: {sshd.available()}")
        return 2
    lines = []
    with tempfile.TemporaryDirectory(prefix="talaria-bench-remote-") as tmp:
        root = Path(tmp)
        with sshd.SshServer(root / "sshd") as ssh, FakeLLM() as llm:
            env = {
                "TALARIA_WORKSPACE_ROOTS": str(root),
                "PATH": f"{ssh.client_path}{os.pathsep}{os.environ['PATH']}",
            }
            with agent_server(root / "srv", llm.base_url, toolsets="todo", env=env) as server:
                server.post_json("/api/environments", ssh.definition("box"))
                server.post_json("/api/environments/confirm", {"name": "box"})
                local_folder = root / "local-project"
                local_folder.mkdir()
                _fill(local_folder)
                _fill(ssh.remote_home / "project")
                local = server.post_json("/api/session/new", {"workspace": str(local_folder)})["session"]
                remote = server.post_json("/api/session/new", {})["session"]
                rid = remote["session_id"]
                server.post_json("/api/session/environment", {"session_id": rid, "environment": "box"})
                server.post_json("/api/session/workspace", {"session_id": rid, "workspace": "~/project"})
                here, there = _operations(server, local["session_id"]), _operations(server, rid)
                for label in here:
                    timings = interleaved_ms(
                        {"on this machine": here[label], "over SSH": there[label]}, opts.runs
                    )
                    lines.append(header(label))
                    lines.extend(row(name, values) for name, values in timings.items())
    print(f"{opts.runs} rounds (one of each, in turn) after one warm-up; {os.cpu_count()} cores, shared")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())

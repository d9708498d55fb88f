"""What the benchmarks of a remote session share: a real OpenSSH server on 127.0.0.1 (the test support's, in a
private mount namespace; root and Debian's openssh-server needed), the server with its agent pointed at the fake
LLM and the confirmed environment "box" on that host, and a local and a remote session on the same files."""

from __future__ import annotations

import argparse
import contextlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from bench.workspace_fixture import header, interleaved_ms, row
from talaria_testing import sshd
from talaria_testing.fake_llm import FakeLLM, agent_server
from talaria_testing.server_proc import ServerProc


def ok(server: ServerProc, method: str, url: str, body: dict[str, Any] | None = None) -> Any:
    """The answer of a request that must succeed."""
    status, data = server.json(method, url, body)
    if status != 200:
        raise RuntimeError(f"{method} {url} -> {status}: {data}")
    return data


@contextlib.contextmanager
def served(root: Path, toolsets: str, **config: Any) -> Iterator[tuple[ServerProc, FakeLLM, sshd.SshServer]]:
    """The SSH server, the fake LLM and the server with "box" defined and confirmed; all stopped after."""
    with sshd.SshServer(root / "sshd") as ssh, FakeLLM() as llm:
        env = {
            "TALARIA_WORKSPACE_ROOTS": str(root),
            "PATH": f"{ssh.client_path}{os.pathsep}{os.environ['PATH']}",
        }
        with agent_server(root / "srv", llm.base_url, toolsets=toolsets, env=env, **config) as server:
            server.post_json("/api/environments", ssh.definition("box"))
            server.post_json("/api/environments/confirm", {"name": "box"})
            yield server, llm, ssh


def sessions(server: ServerProc, local_folder: Path) -> tuple[str, str]:
    """A session in ``local_folder`` here and one in ``~/project`` on "box": their ids."""
    local = server.post_json("/api/session/new", {"workspace": str(local_folder)})["session"]["session_id"]
    remote = server.post_json("/api/session/new", {})["session"]["session_id"]
    server.post_json("/api/session/environment", {"session_id": remote, "environment": "box"})
    server.post_json("/api/session/workspace", {"session_id": remote, "workspace": "~/project"})
    return local, remote


def runs_asked(doc: str, argv: list[str] | None) -> int | None:
    """The ``--runs`` asked on the command line, or None (said why) when the SSH server cannot run here."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=20)
    runs = int(parser.parse_args(argv).runs)
    if sshd.available():
        print(f"cannot run: {sshd.available()}")
        return None
    return runs


def side_by_side(
    here: dict[str, Callable[[], object]], there: dict[str, Callable[[], object]], runs: int
) -> list[str]:
    """The table's lines of each operation, on this machine and over SSH, timed in turn."""
    lines = []
    for label in here:
        timings = interleaved_ms({"on this machine": here[label], "over SSH": there[label]}, runs)
        lines.append(header(label))
        lines.extend(row(name, values) for name, values in timings.items())
    return lines

"""Each turn's changes of a session in an SSH environment beside the same view on this machine, and what a
snapshot costs.

Part one: a session whose folder is on a real OpenSSH server on 127.0.0.1 (the test support's, in a private
mount namespace) and a local session, each with the same turns (each writing a file of a 200-file folder,
driven by the fake LLM), read through the server's routes, taken in turn: the list of every turn's counts,
one turn's files, one file's diff, and a turn's restore with its undo. The local session is the floor.

Part two: one snapshot of a 200-file folder with one file changed, the host's work alone (the snapshot
script run by bash on this machine) beside the agent's own ``CheckpointManager`` on the same folder. A snapshot
on a host adds one command through the environment's SSH master connection (part one's figures show it).

    .venv/bin/python bench/bench_remote_turn_changes.py              # 20 rounds
    .venv/bin/python bench/bench_remote_turn_changes.py --runs 50

Needs root (the SSH server's private mount namespace) and Debian's openssh-server.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from api.rules import checkpoint_scripts  # noqa: E402
from bench import remote_fixture  # noqa: E402
from bench.remote_fixture import ok  # noqa: E402
from bench.workspace_fixture import fill_folder, header, interleaved_ms, row  # noqa: E402
from talaria_testing.chat_client import chat, session  # noqa: E402
from talaria_testing.fake_llm import FakeLLM, Reply  # noqa: E402
from talaria_testing.server_proc import ServerProc  # noqa: E402

FOLDER_FILES = 200
TURNS = 6


def _turns(server: ServerProc, llm: FakeLLM, sids: list[str]) -> None:
    for n in range(TURNS):
        time.sleep(1 - time.time() % 1 + 0.01)  # checkpoints are dated to the second
        for sid in sids:
            write = {
                "name": "write_file",
                "arguments": {"path": f"many/file-{n:06}.txt", "content": f"turn {n}\n"},
            }
            llm.script(Reply(tool_calls=[write]), Reply(text="Written."))
            chat(server, sid, f"turn {n}")


def _operations(server: ServerProc, sid: str) -> dict[str, Callable[[], object]]:
    turns = [row["_idx"] for row in session(server, sid)["messages"] if row["role"] == "user"]
    middle = turns[len(turns) // 2]
    path = f"many/file-{len(turns) // 2:06}.txt"

    def restore_and_undo() -> None:
        done = ok(server, "POST", "/api/rollback/turn/restore", {"session_id": sid, "turn": middle})
        ok(
            server,
            "POST",
            "/api/rollback/turn/undo",
            {"session_id": sid, "turn": middle, "undo": done["undo"]},
        )

    return {
        f"every turn's counts ({TURNS} turns)": lambda: ok(
            server, "GET", f"/api/rollback/turns?session_id={sid}"
        ),
        "one turn's files": lambda: ok(server, "GET", f"/api/rollback/turn?session_id={sid}&turn={middle}"),
        "one file's diff": lambda: ok(
            server, "GET", f"/api/rollback/turn/diff?session_id={sid}&turn={middle}&path={path}"
        ),
        "restore a turn, then undo it": restore_and_undo,
    }


def _snapshots(root: Path, runs: int) -> list[str]:
    """The host's snapshot script and the agent's own checkpoint, each of a 200-file folder with one change."""
    os.environ["HERMES_HOME"] = str(root / "hermes_home")  # the agent's store goes there, never ~/.hermes
    from tools.checkpoint_manager import CheckpointManager  # noqa: PLC0415 - after HERMES_HOME is set

    ours, theirs = root / "host-folder", root / "agent-folder"
    for folder in (ours, theirs):
        fill_folder(folder / "many", FOLDER_FILES)
    env = {"PATH": os.environ["PATH"], "HOME": str(root / "host-home")}
    manager = CheckpointManager(enabled=True)
    counter = iter(range(10**9))

    def host() -> None:
        (ours / "many" / "file-000000.txt").write_text(f"{next(counter)}\n")
        script = checkpoint_scripts.snapshot(
            "before write_file", int(time.time()), checkpoint_scripts.Limits()
        )
        subprocess.run(["bash", "-c", script], cwd=ours, env=env, check=True, capture_output=True)

    def agent() -> None:
        (theirs / "many" / "file-000000.txt").write_text(f"{next(counter)}\n")
        manager._take(str(theirs), "before write_file")

    timings = interleaved_ms(
        {"the host's script (bash here)": host, "the agent's CheckpointManager": agent}, runs
    )
    lines = [header(f"one snapshot of a {FOLDER_FILES}-file folder, one file changed")]
    lines.extend(row(name, values) for name, values in timings.items())
    return lines


def main(argv: list[str] | None = None) -> int:
    runs = remote_fixture.runs_asked(__doc__ or "", argv)
    if runs is None:
        return 2
    lines = []
    with tempfile.TemporaryDirectory(prefix="talaria-bench-turn-changes-") as tmp:
        root = Path(tmp)
        kept = {"checkpoints": {"max_snapshots": 500}}  # each restore and undo adds a checkpoint
        with remote_fixture.served(root, "file", extra=kept) as (server, llm, ssh):
            local_folder = root / "local-project"
            fill_folder(local_folder / "many", FOLDER_FILES)
            fill_folder(ssh.remote_home / "project" / "many", FOLDER_FILES)
            local, remote = remote_fixture.sessions(server, local_folder)
            _turns(server, llm, [local, remote])
            here, there = _operations(server, local), _operations(server, remote)
            lines.extend(remote_fixture.side_by_side(here, there, runs))
        lines.extend(_snapshots(root, runs))
    print(f"{runs} rounds (one of each, in turn) after one warm-up; {os.cpu_count()} cores, shared")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())

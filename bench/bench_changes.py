"""The changes of a turn that touched 1,000 files, through the real server, beside their floor.

A workspace of 20,000 small files (``--files``) gets a checkpoint from hermes-agent's own checkpoint store
(``api.agent.agent_runtime.checkpoint_manager()``, the one the routes use, in this process and on the server's
``HERMES_HOME``), as the agent takes one before a round of file changes; then 1,000 files (``--changed``)
get a line each and the next checkpoint is taken, as the agent's next round would. ``--history`` older
checkpoints (one file changed each) come before, so the list can be as long as the agent keeps (20).
Timed, in turn, ``--runs`` rounds:

- ``GET /api/rollback/list`` (the checkpoints with their counts) and ``GET /api/rollback/diff`` from the
  turn's checkpoint to the workspace now (stat and unified diff), the whole request and the server's own
  time (its ``Server-Timing``);
- the manager's own ``list_checkpoints`` and ``diff`` in this process;
- the floor: ``git diff --stat`` and ``git diff`` between the two checkpoints in the shadow store, and
  one git process that does nothing (each checkpoint call runs several).

Then the diff route again as the first diff after a checkpoint meets the store: the agent's ``diff``
ends with a ``git read-tree`` that forgets the stat of every file in the workspace's index, so each later
diff hashes all of them again in its ``git add -A``; the first after a checkpoint does not.

The goal (issue 23) is 200 ms for the changes list of such a turn. The fixture is made in a temp folder
and removed after.

    .venv/bin/python bench/bench_changes.py                        # 20,000 files, 1,000 changed, 15 runs
    .venv/bin/python bench/bench_changes.py --history 18 --runs 9  # a list of 20 checkpoints
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.workspace_fixture import fill_folder, header, interleaved_ms, row, timed_get  # noqa: E402
from talaria_testing.server_proc import ServerProc  # noqa: E402

PER_FOLDER = 100


def make_workspace(workspace: Path, files: int) -> list[Path]:
    """``files`` files in folders of 100; answers them in order."""
    out: list[Path] = []
    for n in range((files + PER_FOLDER - 1) // PER_FOLDER):
        folder = workspace / "src" / f"mod-{n:04}"
        fill_folder(folder, min(PER_FOLDER, files - len(out)))
        out.extend(sorted(folder.iterdir()))
    return out


def change(paths: list[Path], tag: str) -> None:
    for path in paths:
        with path.open("a", encoding="utf-8") as handle:
            handle.write(f"changed in {tag}\n")


def checkpoint(manager: Any, workspace: Path, reason: str) -> str:
    manager.new_turn()  # a checkpoint is taken once per directory per turn
    if not manager.ensure_checkpoint(str(workspace), reason):
        raise RuntimeError(f"the agent took no checkpoint ({reason})")
    return str(manager.list_checkpoints(str(workspace))[0]["hash"])


def shadow_git(workspace: Path, *args: str, index: bool = False) -> bytes:
    """git on the agent's shadow store for ``workspace``, as its checkpoint manager runs it (``index``: with
    the workspace's own index in the store)."""
    from tools import checkpoint_manager as store

    base = store._store_path(store.CHECKPOINT_BASE)
    index_file = store._index_path(base, store._project_hash(str(workspace))) if index else None
    env = store._git_env(base, str(workspace), index_file=index_file)
    return subprocess.run(["git", *args], env=env, cwd=workspace, capture_output=True, check=True).stdout


def fresh_index_ms(workspace: Path, get: Any, runs: int) -> list[float]:
    """The diff as the first one after the agent's checkpoint meets it: the workspace's index in the store
    knows every file's stat (the agent's ``diff`` ends with a ``read-tree`` that forgets them, so the next
    ``add -A`` hashes every file again). The refresh before each call is not timed."""
    out = []
    for _ in range(runs):
        shadow_git(workspace, "update-index", "-q", "--refresh", index=True)
        started = time.perf_counter()
        get()
        out.append((time.perf_counter() - started) * 1000)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--files", type=int, default=20_000)
    parser.add_argument("--changed", type=int, default=1_000)
    parser.add_argument("--history", type=int, default=0, help="older checkpoints before the turn's")
    parser.add_argument("--runs", type=int, default=15)
    opts = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="talaria-bench-changes-") as tmp:
        root = Path(tmp)
        with ServerProc(root) as server:
            # The agent's store lives under HERMES_HOME, read when its module is first imported: the server's.
            os.environ["HERMES_HOME"] = str(server.hermes_home)
            from api.agent import agent_runtime

            manager = agent_runtime.checkpoint_manager()
            workspace = server.workspace
            paths = make_workspace(workspace, opts.files)
            for n in range(opts.history):
                checkpoint(manager, workspace, f"round {n}")
                change(paths[n : n + 1], f"round {n}")
            before = checkpoint(manager, workspace, "before the turn")
            step = max(1, len(paths) // opts.changed)
            change(paths[::step][: opts.changed], "the turn")
            after = checkpoint(manager, workspace, "after the turn")
            sid = server.post_json("/api/session/new", {})["session"]["session_id"]
            listed, diffed = [], []
            list_url = f"/api/rollback/list?session_id={sid}"
            diff_url = f"/api/rollback/diff?session_id={sid}&hash={before}"
            found = server.get_json(list_url)["checkpoints"]
            stat = server.get_json(diff_url)["stat"].splitlines()[-1].strip()
            timings = interleaved_ms(
                {
                    "GET /api/rollback/list, whole request": timed_get(server, list_url, listed),
                    "GET /api/rollback/diff, whole request": timed_get(server, diff_url, diffed),
                    "manager.list_checkpoints, in process": lambda: manager.list_checkpoints(str(workspace)),
                    "manager.diff, in process": lambda: manager.diff(str(workspace), before),
                    "floor: git diff --stat, checkpoint to next": lambda: shadow_git(
                        workspace, "diff", "--stat", before, after
                    ),
                    "floor: git diff, checkpoint to next": lambda: shadow_git(
                        workspace, "diff", before, after
                    ),
                    "floor: one git process (git --version)": lambda: shadow_git(workspace, "--version"),
                },
                opts.runs,
            )
            fresh_app: list[float] = []
            fresh = fresh_index_ms(workspace, timed_get(server, diff_url, fresh_app), opts.runs)
    print(f"{opts.runs} rounds (one of each, in turn) after one warm-up; {os.cpu_count()} cores, shared")
    print(
        header(
            f"the changes of a turn: {opts.files:,} files, {stat}; {len(found)} checkpoints listed", width=46
        )
    )
    print(row("GET /api/rollback/list, the server's own time", listed[-opts.runs :], width=46))
    print(row("GET /api/rollback/diff, the server's own time", diffed[-opts.runs :], width=46))
    for label, values in timings.items():
        print(row(label, values, width=46))
    print(row("GET /api/rollback/diff, first after a checkpoint", fresh, width=46))
    print(row("  the server's own time", fresh_app, width=46))
    return 0


if __name__ == "__main__":
    sys.exit(main())

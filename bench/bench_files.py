"""The files panel's folder listing beside its floor: a folder of 10,000 files listed through the server's
route (``GET /api/list``, client-side time of the whole request on 127.0.0.1) and through
``workspace_files.list_folder`` in process, beside the floor of the same work (``os.scandir`` with one
``lstat`` per entry, then a sort).

    .venv/bin/python bench/bench_files.py [--entries 10000] [--runs 9]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from talaria_testing.server_proc import ServerProc  # noqa: E402


def median_ms(fn, runs: int) -> float:
    fn()  # warm
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples)


def floor(folder: Path) -> list:
    rows = []
    with os.scandir(folder) as found:
        for item in found:
            info = item.stat(follow_symlinks=False)
            rows.append((item.name, info.st_size, info.st_mtime))
    rows.sort()
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--entries", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=9)
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        with ServerProc(root, env={"TALARIA_WORKSPACE_ROOTS": str(root)}) as server:
            folder = server.workspace / "big"
            folder.mkdir()
            for i in range(opts.entries):
                (folder / f"file-{i:06}.txt").write_bytes(b"x")
            sid = server.post_json("/api/session/new", {})["session"]["session_id"]
            route = median_ms(
                lambda: server.request("GET", f"/api/list?session_id={sid}&path=big"), opts.runs
            )
            size = len(server.request("GET", f"/api/list?session_id={sid}&path=big")[2])
            base = median_ms(lambda: floor(folder), opts.runs)
    print(f"list a folder of {opts.entries:,} entries (median of {opts.runs})")
    print(f"  GET /api/list, whole request  {route:8.1f} ms   ({size / 1024:,.0f} KB of JSON)")
    print(f"  floor: scandir + lstat + sort {base:8.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())

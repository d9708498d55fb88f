"""The files panel's folder listing beside its floor: folders of 10,000 and 20,000 files (the listing's
cap) listed through the server's route (``GET /api/list``, client-side time of the whole request on
127.0.0.1), beside the floor of the same work in this process (``os.scandir`` with one ``lstat`` per
entry, then a sort) and that floor with the answer's rows built and encoded as the route encodes them.
The goal (issue 23) is 50 ms at the server for 10,000 entries. The fixture is made in a temp folder and
removed after.

    .venv/bin/python bench/bench_files.py                       # 10,000 and 20,000 entries, 15 runs
    .venv/bin/python bench/bench_files.py --entries 10000 --runs 30
"""

from __future__ import annotations

import argparse
import os
import stat
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from api.rules.jsonio import dumps  # noqa: E402
from bench.workspace_fixture import fill_folder, header, interleaved_ms, row, timed_get  # noqa: E402
from talaria_testing.server_proc import ServerProc  # noqa: E402


def floor(folder: Path) -> list:
    rows = []
    with os.scandir(folder) as found:
        for item in found:
            info = item.stat(follow_symlinks=False)
            rows.append((item.name, info.st_size, info.st_mtime))
    rows.sort()
    return rows


def floor_json(folder: Path, prefix: str) -> bytes:
    """The floor, with the route's rows built and encoded as the route does (no session, no HTTP)."""
    rows = []
    with os.scandir(folder) as found:
        for item in found:
            info = item.stat(follow_symlinks=False)
            kind = "file" if stat.S_ISREG(info.st_mode) else "dir"
            name = item.name
            rows.append(
                {
                    "name": name,
                    "path": prefix + name,
                    "type": kind,
                    "size": info.st_size,
                    "mtime": info.st_mtime,
                }
            )
    rows.sort(key=lambda r: (r["type"] != "dir", r["name"].lower()))
    return dumps({"workspace": str(folder.parent), "path": prefix, "entries": rows, "hidden": 0})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--entries", default="10000,20000", help="comma-separated folder sizes")
    parser.add_argument("--runs", type=int, default=15)
    opts = parser.parse_args(argv)
    sizes = [int(n) for n in opts.entries.split(",")]
    lines = []
    with tempfile.TemporaryDirectory(prefix="talaria-bench-files-") as tmp:
        root = Path(tmp)
        with ServerProc(root) as server:
            sid = server.post_json("/api/session/new", {})["session"]["session_id"]
            for size in sizes:
                name = f"big-{size}"
                folder = server.workspace / name
                fill_folder(folder, size)
                url = f"/api/list?session_id={sid}&path={name}"
                app: list[float] = []
                size_kb = len(timed_get(server, url, app)()) / 1024
                timings = interleaved_ms(
                    {
                        "GET /api/list, whole request": timed_get(server, url, app),
                        "floor: scandir + lstat + sort": lambda folder=folder: floor(folder),
                        "floor + the answer's rows, encoded": lambda folder=folder, name=name: floor_json(
                            folder, f"{name}/"
                        ),
                    },
                    opts.runs,
                )
                lines.append(header(f"list a folder of {size:,} entries ({size_kb:,.0f} KB of JSON)"))
                lines.append(row("GET /api/list, the server's own time", app[-opts.runs :]))
                lines.extend(row(label, values) for label, values in timings.items())
    print(f"{opts.runs} rounds (one of each, in turn) after one warm-up; {os.cpu_count()} cores, shared")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())

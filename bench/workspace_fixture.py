"""What the files benchmarks share: a workspace of many small files made on disk, samples of a call's time,
and one line of a table (p50, p99, min of the samples) so every script reports alike."""

from __future__ import annotations

import re
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from bench.bench_chat import pct
from talaria_testing.server_proc import ServerProc

_APP = re.compile(r"app;dur=([0-9.]+)")


def fill_folder(folder: Path, count: int, prefix: str = "file") -> None:
    """``count`` one-line files in ``folder`` (made if missing), named so they sort as they were made."""
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(count):
        (folder / f"{prefix}-{i:06}.txt").write_bytes(f"line {i}\n".encode())


def repository(root: Path, files: int, big: int) -> dict[str, int]:
    """A repository-shaped tree of ``files`` files: a few top-level files, ``big/`` with ``big`` entries, and
    the rest as ``src/pkg-NN/mod-NN/`` folders of 100 files each. Answers the counts the tree shows."""
    top = ["README.md", "pyproject.toml", "Makefile", "LICENSE"]
    for name in top:
        (root / name).write_text(f"{name}\n")
    fill_folder(root / "big", big)
    rest = max(0, files - big - len(top))
    per_folder, per_package = 100, 10
    folders = (rest + per_folder - 1) // per_folder
    made = 0
    for n in range(folders):
        count = min(per_folder, rest - made)
        fill_folder(root / "src" / f"pkg-{n // per_package:03}" / f"mod-{n % per_package:02}", count)
        made += count
    (root / "docs").mkdir()
    (root / "docs" / "index.md").write_text("# Docs\n")
    # The first level: the top files, big/, src/, docs/.
    return {"first_level": len(top) + 3, "big": big, "files": len(top) + big + made + 1}


def samples_ms(call: Callable[[], object], runs: int, warm: int = 1) -> list[float]:
    """``runs`` timings of ``call`` in milliseconds, after ``warm`` untimed calls."""
    for _ in range(warm):
        call()
    out = []
    for _ in range(runs):
        started = time.perf_counter()
        call()
        out.append((time.perf_counter() - started) * 1000)
    return out


def interleaved_ms(calls: dict[str, Callable[[], object]], runs: int) -> dict[str, list[float]]:
    """``runs`` timings of each call, taken in turn (one of each per round), so that a busy machine weighs on
    each alike; one untimed round first."""
    for call in calls.values():
        call()
    out: dict[str, list[float]] = {label: [] for label in calls}
    for _ in range(runs):
        for label, call in calls.items():
            started = time.perf_counter()
            call()
            out[label].append((time.perf_counter() - started) * 1000)
    return out


def timed_get(server: ServerProc, url: str, app_ms: list[float]) -> Callable[[], bytes]:
    """A GET of ``url`` that must answer 200 and notes the server's own time (its ``Server-Timing`` ``app``,
    the route up to the response head) in ``app_ms``."""

    def call() -> bytes:
        status, headers, body = server.request("GET", url)
        if status != 200:
            raise RuntimeError(f"GET {url} -> {status}: {body[:300]!r}")
        app_ms.append(float(_APP.search(headers["server-timing"]).group(1)))
        return body

    return call


def row(label: str, values: list[float], width: int = 44) -> str:
    """``label  p50  p99  min`` in milliseconds."""
    return f"  {label:<{width}} {statistics.median(values):8.1f} {pct(values, 99):8.1f} {min(values):8.1f}"


def header(title: str, width: int = 44) -> str:
    return f"{title}\n  {'':<{width}} {'p50 ms':>8} {'p99 ms':>8} {'min ms':>8}"

"""The real server with a probe of its Python heap that a test reads from outside (``HeapProbedServer``).

``main`` (``python -c`` with ``DIR server.py ARGS...``) runs the server as ``server.py`` does, after
installing two signal handlers in its process: SIGUSR2 starts ``tracemalloc`` (the mark), SIGUSR1 collects
garbage and writes to ``DIR/heap.json`` what is traced since the mark and still held (bytes, blocks) and the
lines that allocated the most of what grew since the previous measure. Memory allocated before the mark (the
imports, the warm-up's caches) is not traced, and neither is the tracing itself, so two measures after the mark
differ by what the server kept in between. The application holds none of this; its worker processes are
started as usual and are not traced.
"""

from __future__ import annotations

import gc
import json
import os
import runpy
import signal
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

from talaria_testing.server_proc import REPO_DIR, ServerProc

_TOP_LINES = 12


class _Probe:
    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.previous: tracemalloc.Snapshot | None = None

    def mark(self, signum: int, frame: Any) -> None:
        gc.collect()
        tracemalloc.start(1)

    def measure(self, signum: int, frame: Any) -> None:
        gc.collect()
        snapshot = tracemalloc.take_snapshot()
        stats = snapshot.statistics("lineno")
        grown = snapshot.compare_to(self.previous, "lineno") if self.previous is not None else []
        self.previous = snapshot
        out = {
            "traced": tracemalloc.get_traced_memory()[0],
            "blocks": sum(stat.count for stat in stats),
            "grown": [str(stat) for stat in grown[:_TOP_LINES]],
        }
        tmp = self.folder / "heap.json.tmp"
        tmp.write_text(json.dumps(out))
        tmp.rename(self.folder / "heap.json")


class HeapProbedServer(ServerProc):
    """``ServerProc`` whose server process answers ``mark`` and ``measure``."""

    def command(self) -> list[str]:
        start = f"import sys; sys.path.insert(0, {str(REPO_DIR)!r}); from talaria_testing.heap_probe import main; main()"
        return [sys.executable, "-c", start, str(self.root), *super().command()[1:]]

    def mark(self) -> None:
        """Start tracing the server's allocations from now on."""
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGUSR2)

    def measure(self, timeout: float = 60.0) -> dict[str, Any]:
        """What the server holds of what it allocated since the mark, after a garbage collection."""
        assert self.proc is not None
        found = self.root / "heap.json"
        found.unlink(missing_ok=True)
        os.kill(self.proc.pid, signal.SIGUSR1)
        deadline = time.monotonic() + timeout
        while not found.exists():
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise AssertionError(f"the server wrote no heap measure:\n{self.log_text()[-4000:]}")
            time.sleep(0.05)
        return dict(json.loads(found.read_text()))


def main() -> None:
    folder, script, *args = sys.argv[1:]
    probe = _Probe(Path(folder))
    signal.signal(signal.SIGUSR2, probe.mark)
    signal.signal(signal.SIGUSR1, probe.measure)
    sys.argv = [script, *args]
    sys.path[0] = str(Path(script).resolve().parent)
    runpy.run_path(script, run_name="__main__")

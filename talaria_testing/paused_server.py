"""The real server, stopped at one durable step of one write, for kill tests through HTTP.

    with PausedServer(tmp_path, step="tmp_written", name="report.txt") as srv:
        ...  # a request that writes report.txt hangs once its temp file is written
        srv.wait_paused()  # the name of the file at the step
        srv.kill()

The server runs as ``python -m talaria_testing.paused_server STEP NAME MARKER -- <talaria args>``: it sets
``api.store.atomic.STEP_HOOK`` (the hook the in-process kill matrix uses) so that the first write step named
``STEP`` on a file whose name starts with ``NAME`` writes that file's name into ``MARKER`` and blocks its
thread for good; everything else runs as ``talaria`` does.
"""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

from talaria_testing.server_proc import REPO_DIR, ServerProc


class PausedServer(ServerProc):
    def __init__(self, root: Path, *, step: str, name: str, **kwargs):
        super().__init__(root, **kwargs)
        self.step = step
        self.name = name
        self.marker = self.root / "paused-at"
        self.extra_env.setdefault("PYTHONPATH", str(REPO_DIR))

    def command(self) -> list[str]:
        talaria = super().command()[2:]  # the arguments after ``python server.py``
        hook = [self.step, self.name, str(self.marker)]
        return [sys.executable, "-m", "talaria_testing.paused_server", *hook, "--", *talaria]

    def wait_paused(self, timeout: float = 20.0) -> str:
        """The name of the file the server stopped at, once it did; ``TimeoutError`` otherwise."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.marker.exists() and (found := self.marker.read_text()):
                return found
            time.sleep(0.02)
        raise TimeoutError(f"the server never reached {self.step} on {self.name}")


def _pause_at(step: str, name: str, marker: Path):
    reached = threading.Event()

    def hook(seen: str, path: Path) -> None:
        if seen != step or not Path(path).name.startswith(name) or reached.is_set():
            return
        reached.set()
        marker.write_text(Path(path).name)
        threading.Event().wait()  # this write goes no further; the test kills the process

    return hook


def main(argv: list[str]) -> int:
    step, name, marker = argv[:3]
    from api.server.cli import main as talaria
    from api.store import atomic

    atomic.STEP_HOOK = _pause_at(step, name, Path(marker))
    return talaria(argv[4:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Another process racing the server over a workspace's files, for the file-safety tests.

    python -m talaria_testing.racers swap <file> <seconds> <big_bytes>
        turns ``file`` in a loop into a small PNG, a FIFO and a PNG of ``big_bytes`` (each by rename)
    python -m talaria_testing.racers claim <folder> <stem> <ext> <seconds>
        creates ``<stem>-<n><ext>`` (n = 1, 2, ...) exclusively, each holding its own name, and prints
        the names it created as JSON; the names the server picks for uploads of ``<stem><ext>``
    python -m talaria_testing.racers relink <folder> <outside> <seconds>
        swaps ``folder`` in a loop for a symbolic link to ``outside`` and back

Each stops by itself after ``seconds``. In a test, ``with racing("swap", ...) as racer:`` starts one and
stops it (``racer.output`` is what it printed) whatever the test does.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

PNG_HEAD = b"\x89PNG\r\n\x1a\n"


def swap(file: Path, seconds: float, big_bytes: int) -> None:
    folder = file.parent
    small, big = folder / ".racer-small", folder / ".racer-big"
    small.write_bytes(PNG_HEAD + b"\x00" * 64)
    big.write_bytes(PNG_HEAD + b"\x00" * big_bytes)
    staging = folder / ".racer-next"
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for make in (
            lambda: os.link(small, staging),
            lambda: os.mkfifo(staging),
            lambda: os.link(big, staging),
        ):
            make()
            os.replace(staging, file)
            time.sleep(0.0002)


def claim(folder: Path, stem: str, ext: str, seconds: float) -> None:
    created: list[str] = []
    deadline = time.monotonic() + seconds
    n = 1
    while time.monotonic() < deadline:
        name = f"{stem}-{n}{ext}"
        try:
            fd = os.open(folder / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            n += 1
            continue
        except FileNotFoundError:
            time.sleep(0.001)  # the folder is not there yet
            continue
        os.write(fd, name.encode())
        os.close(fd)
        created.append(name)
        n += 1
        time.sleep(0.002)
    print(json.dumps(created), flush=True)


def relink(folder: Path, outside: Path, seconds: float) -> None:
    real = folder.with_name(folder.name + ".racer-real")
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            os.rename(folder, real)
        except FileNotFoundError:
            time.sleep(0.001)
            continue
        os.symlink(outside, folder)
        time.sleep(0.001)
        os.unlink(folder)
        os.rename(real, folder)
        time.sleep(0.001)


def main(argv: list[str]) -> int:
    kind, *args = argv
    if kind == "swap":
        swap(Path(args[0]), float(args[1]), int(args[2]))
    elif kind == "claim":
        claim(Path(args[0]), args[1], args[2], float(args[3]))
    elif kind == "relink":
        relink(Path(args[0]), Path(args[1]), float(args[2]))
    else:
        raise SystemExit(f"unknown racer {kind!r}")
    return 0


@dataclass
class Racer:
    proc: subprocess.Popen
    output: str = ""
    extra: dict = field(default_factory=dict)

    def wait(self, timeout: float = 30.0) -> str:
        """Wait for it to stop by itself; what it printed."""
        out, _ = self.proc.communicate(timeout=timeout)
        self.output = out or ""
        return self.output


@contextmanager
def racing(kind: str, *args: object) -> Iterator[Racer]:
    """A racer process for the ``with`` block; killed at its end if it still runs."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "talaria_testing.racers", kind, *map(str, args)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parent.parent,
    )
    racer = Racer(proc)
    try:
        yield racer
    finally:
        if proc.poll() is None:
            proc.kill()
        if proc.stdout is not None and not racer.output:
            racer.output = proc.stdout.read() or ""
            proc.stdout.close()
        proc.wait(10)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

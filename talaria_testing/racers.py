"""Another process racing the server over a workspace's files, for the file-safety tests.

    python -m talaria_testing.racers swap <file> <seconds> <big_bytes>
        turns ``file`` in a loop into a small PNG, a FIFO and a PNG of ``big_bytes`` (each by rename)
    python -m talaria_testing.racers claim <folder> <seconds>
        watches ``folder`` for a writer's temp file ``<name>.tmp.<pid>.<x>`` and at once creates ``name``
        and the next free ``<stem>-<n><ext>`` names exclusively, each holding its own name; prints each
        name it created on a line
    python -m talaria_testing.racers relink <folder> <outside> <seconds>
        swaps ``folder`` in a loop for a symbolic link to ``outside`` and back (a folder made again
        meanwhile is kept whole as ``<folder>.racer-real-<n>``)

Each stops by itself after ``seconds``. In a test, ``with racing("swap", ...) as racer:`` starts one and
stops it (``racer.output`` is what it printed) whatever the test does.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

PNG_HEAD = b"\x89PNG\r\n\x1a\n"
_TEMP = re.compile(r"^(.+)\.tmp\.[0-9]+\.[0-9a-f]+$")


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


def claim(folder: Path, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            names = os.listdir(folder)
        except FileNotFoundError:
            time.sleep(0.001)  # the folder is not there yet
            continue
        for entry in names:
            match = _TEMP.match(entry)
            if match is None:
                continue
            for name in (match.group(1), *_next_names(match.group(1), names)):
                try:
                    fd = os.open(folder / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
                except FileExistsError:
                    continue
                os.write(fd, name.encode())
                os.close(fd)
                print(name, flush=True)


def _next_names(name: str, present: list[str]) -> list[str]:
    """The next two free ``stem-<n>.ext`` names: where a writer that finds ``name`` taken goes next."""
    stem, ext = os.path.splitext(re.sub(r"-[0-9]+(?=\.[^.]*$|$)", "", name))
    free = [f"{stem}-{n}{ext}" for n in range(1, len(present) + 3) if f"{stem}-{n}{ext}" not in present]
    return free[:2]


def relink(folder: Path, outside: Path, seconds: float) -> None:
    real = folder.with_name(folder.name + ".racer-real")
    deadline = time.monotonic() + seconds
    kept = 0
    while time.monotonic() < deadline:
        try:
            os.rename(folder, real)
        except OSError:
            time.sleep(0.001)
            continue
        try:
            os.symlink(outside, folder)
        except FileExistsError:  # made again meanwhile: keep the first one aside, whole
            kept += 1
            os.rename(real, real.with_name(f"{real.name}-{kept}"))
            continue
        time.sleep(0.001)
        os.unlink(folder)
        os.rename(real, folder)
        time.sleep(0.001)


def main(argv: list[str]) -> int:
    kind, *args = argv
    if kind == "swap":
        swap(Path(args[0]), float(args[1]), int(args[2]))
    elif kind == "claim":
        claim(Path(args[0]), float(args[1]))
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

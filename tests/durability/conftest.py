"""The durability suite's knobs: reduced by default (CI), full with ``--durability-full`` (the report).

``--durability-json PATH`` writes the suite's counters (kill points, crash states, violations, ...) for
``python -m bench.report``.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from talaria_testing.counters import Counters


def pytest_addoption(parser):
    group = parser.getgroup("durability")
    group.addoption(
        "--durability-full", action="store_true", default=False, help="run the durability suite in full"
    )
    group.addoption(
        "--durability-json", default=None, metavar="PATH", help="write the durability counters to PATH"
    )


@dataclass(frozen=True)
class Mode:
    full: bool
    sizes: tuple[int, ...]  # base message counts the scenarios are built with
    random_kills: int  # kills at random moments of a random operation sequence
    crash_sizes: tuple[int, ...]
    threads: int
    operations: int  # concurrency: operations in all
    load_seconds: float  # 0 = no load test


REDUCED = Mode(
    full=False, sizes=(8,), random_kills=60, crash_sizes=(8,), threads=8, operations=5000, load_seconds=0
)
FULL = Mode(
    full=True,
    sizes=(8, 40, 400),
    random_kills=600,
    crash_sizes=(8, 60),
    threads=16,
    operations=20000,
    load_seconds=60,
)


def _option(config, name: str):
    try:
        return config.getoption(name)
    except ValueError:  # the option is unknown when this conftest is not an initial one
        return None


@pytest.fixture(scope="session")
def durability(request) -> Mode:
    return FULL if _option(request.config, "--durability-full") else REDUCED


@pytest.fixture(scope="session")
def counters(request, durability):
    c = Counters()
    started = time.monotonic()
    yield c
    path = _option(request.config, "--durability-json")
    if path:
        c.write(
            path,
            {
                "mode": "full" if durability.full else "reduced",
                "seconds": round(time.monotonic() - started, 1),
            },
        )


@pytest.fixture
def scratch(tmp_path):
    """A folder on tmpfs when there is one (checking thousands of states is then CPU-bound, not fsync-bound)."""
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK):
        folder = Path(tempfile.mkdtemp(prefix="talaria-durability-", dir=shm))
        yield folder
        shutil.rmtree(folder, ignore_errors=True)
    else:
        yield tmp_path

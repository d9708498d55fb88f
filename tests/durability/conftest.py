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


COUNTERS = Counters()
_STARTED = time.monotonic()
_SECTIONS = {
    "test_kill_matrix": "kill_matrix",
    "test_kill_during_save": "kill_matrix",
    "test_kill_chat_turn": "kill_matrix",
    "test_crash_states": "crash_states",
    "test_crash_states_model": "crash_states",
    "test_faults": "faults",
    "test_concurrency": "concurrency",
    "test_hostile_input": "hostile_input",
    "test_load": "load",
    "test_turns_model": "turns_model",
}


@pytest.fixture(scope="session")
def counters() -> Counters:
    return COUNTERS


def _violations() -> int:
    return sum(v.get("violations", 0) for v in COUNTERS.to_dict()["sections"].values())


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A failing test that recorded no violation itself still counts as one (faults, hostile input...)."""
    if call.when == "setup":
        item.stash[_BEFORE] = _violations()
    outcome = yield
    report = outcome.get_result()
    if call.when == "call" and report.failed and _violations() == item.stash.get(_BEFORE, 0):
        message = str(call.excinfo.value).strip().splitlines()[0][:300] if call.excinfo else "failed"
        COUNTERS.violation(
            _SECTIONS.get(item.module.__name__.rsplit(".", 1)[-1], "other"), item.nodeid, message
        )


_BEFORE = pytest.StashKey[int]()


def pytest_sessionfinish(session):
    path = _option(session.config, "--durability-json")
    if path:
        full = bool(_option(session.config, "--durability-full"))
        COUNTERS.write(
            path, {"mode": "full" if full else "reduced", "seconds": round(time.monotonic() - _STARTED, 1)}
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

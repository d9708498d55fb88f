"""Pytest plugin: isolates HERMES_HOME and the state dir, then configures ``api.store.config`` with them; fails a
test whose processes outlive it, and gives the shared fixtures (a state dir, the fake LLM).

Loaded by ``tests/conftest.py``; a test outside the repository (the founding acceptance test, run in
place) loads it with ``-p talaria_testing.plugin``. It is repository-only: installing Talaria never
installs it, so it changes no other project's test runs.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

from talaria_testing import process_leaks

_PROVIDER_ENV = re.compile(r".*_API_KEY$|^HERMES_INFERENCE_PROVIDER$|^CUSTOM_BASE_URL$|^OPENROUTER_BASE_URL$")


def _isolate_environment() -> Path:
    root = Path(tempfile.mkdtemp(prefix="talaria-tests-"))
    home = root / "hermes_home"
    state = root / "webui_state"
    workspace = root / "workspace"
    for folder in (home, state, workspace):
        folder.mkdir(parents=True)
    for key in list(os.environ):
        if _PROVIDER_ENV.match(key) or key.startswith("TALARIA_"):
            del os.environ[key]
    os.environ["HERMES_HOME"] = str(home)
    os.environ["HERMES_WEBUI_STATE_DIR"] = str(state)
    os.environ["HERMES_WEBUI_DEFAULT_WORKSPACE"] = str(workspace)
    os.environ["TALARIA_WORKSPACE_ROOTS"] = str(root)  # a session's workspace never reaches the real home
    os.environ["NO_PROXY"] = "127.0.0.1,localhost"
    os.environ["no_proxy"] = "127.0.0.1,localhost"
    os.environ["TALARIA_TEST_ROOT"] = str(root)
    return root


def _configure_talaria() -> None:
    """In-process tests see the isolated folders, as the server would after parsing its settings."""
    from api.store import config

    # In-process tests put fakes of the agent in sys.modules, which a worker process would not see: their
    # turns run as threads here. Test servers run the default, worker processes.
    config.configure({**config.load_settings(), "agent_workers": 0})


TEST_ROOT = _isolate_environment()
_configure_talaria()
process_leaks.become_subreaper()


def pytest_unconfigure(config):
    shutil.rmtree(TEST_ROOT, ignore_errors=True)


def _describe(leaked: dict[int, str]) -> str:
    return "; ".join(f"pid {pid}: {cmd}" for pid, cmd in sorted(leaked.items()))


def pytest_addoption(parser):
    parser.addoption(
        "--process-grace",
        type=float,
        default=5.0,
        help="seconds a test's processes may take to exit after it ends before it fails for leaving them",
    )


@pytest.fixture(autouse=True)
def _no_process_outlives_its_test(request):
    """Every process a test started is gone when it ends (wider fixtures' processes are checked at the end)."""
    from talaria_testing.server_proc import ServerProc

    before = set(process_leaks.live_descendants())
    wider = ServerProc.instances()  # a wider fixture's server, which a test may restart; the fixture stops it
    yield
    restarted = {srv.proc.pid for srv in wider if srv.running()}
    leaked = process_leaks.leaked_since(before | restarted, request.config.getoption("--process-grace"))
    if leaked:
        process_leaks.kill_all(leaked)
        pytest.fail(f"processes outlived the test: {_describe(leaked)}", pytrace=False)


@pytest.fixture(autouse=True)
def _no_index_write_outlives_its_test():
    """A sidebar-index write a test scheduled (delayed by ``index_flush_delay``) happens within that test,
    not in the middle of a later one that records every durable write."""
    yield
    store = sys.modules.get("api.store.session_store")
    in_use = store.in_use() if store is not None else None
    if in_use is not None:
        in_use.close()


def pytest_sessionfinish(session, exitstatus):
    leaked = process_leaks.leaked_since(set())
    if leaked:
        process_leaks.kill_all(leaked)
        session.config.get_terminal_writer().line(
            f"processes outlived the test run: {_describe(leaked)}", red=True
        )
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture
def cleanup_test_sessions():
    """A list a test appends session ids to; their files are removed from the live store afterwards."""
    created: list[str] = []
    yield created
    import api.store.models as models

    store = models.store()
    for sid in created:
        store.drop(sid)
        for folder in {store.session_dir}:
            for path in folder.glob(f"{sid}.json*"):
                try:
                    path.unlink()
                except OSError:
                    pass


@pytest.fixture(scope="module")
def llm():
    """The fake LLM shared by a test module (the browser tests share one per run)."""
    from talaria_testing.fake_llm import FakeLLM

    with FakeLLM() as server:
        yield server


@pytest.fixture
def fake(llm):
    """The module's fake LLM, emptied for this test and released after it."""
    with llm.fresh():
        yield llm


@pytest.fixture
def store(tmp_path):
    """A store on ``tmp_path / "sessions"``, the one in use for the test (what ``api.store.models``' names act on)."""
    from talaria_testing.stores import store_on

    session_dir = tmp_path / "sessions"
    session_dir.mkdir()
    with store_on(session_dir) as built:
        yield built


@pytest.fixture
def app(store):
    """An ``App`` on the test's store (``store``), its live state in use for the test: the sidebar feed and the
    search indexer follow its saves."""
    from api.server.app import App

    built = App(store=store)
    yield built
    built.close()
    built.release()  # the next test starts with no live state of this one's


@pytest.fixture
def state_dir(store):
    """The session folder of the test's store (``store``)."""
    return store.session_dir


def _deterministic_hypothesis() -> None:
    """The same examples on every run: CI judges the code, not the luck of a random search."""
    from hypothesis import settings

    settings.register_profile("talaria", derandomize=True, print_blob=True)
    settings.load_profile("talaria")


_deterministic_hypothesis()

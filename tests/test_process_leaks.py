"""The pytest plugin fails a test that leaves a process running, and cleans up after it."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from talaria_testing import process_leaks

pytest_plugins = ["pytester"]
REPO_DIR = Path(__file__).resolve().parent.parent


def _run_with_the_plugin(pytester, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(REPO_DIR))
    return pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "-p", "talaria_testing.plugin", "--process-grace", "0.5"
    )


def test_a_test_that_leaves_a_child_running_fails_and_the_child_is_killed(pytester, monkeypatch):
    pytester.makepyfile(
        test_leaky=textwrap.dedent(
            """
            import subprocess, sys

            def test_leaks():
                subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
            """
        )
    )
    result = _run_with_the_plugin(pytester, monkeypatch)
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*processes outlived the test*time.sleep(120)*"])
    assert "time.sleep(120)" not in " ".join(process_leaks.leaked_since(set(), grace_s=0).values())


def test_a_test_that_stops_what_it_started_passes(pytester, monkeypatch):
    pytester.makepyfile(
        test_tidy=textwrap.dedent(
            """
            import subprocess, sys

            def test_tidy():
                proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
                proc.kill()
                proc.wait()
            """
        )
    )
    _run_with_the_plugin(pytester, monkeypatch).assert_outcomes(passed=1)


def test_a_test_may_restart_the_server_of_a_wider_fixture(pytester, monkeypatch):
    pytester.makepyfile(
        test_restart=textwrap.dedent(
            """
            import pytest
            from talaria_testing.server_proc import ServerProc

            @pytest.fixture(scope="module")
            def srv(tmp_path_factory):
                with ServerProc(tmp_path_factory.mktemp("srv")) as server:
                    yield server

            def test_restarts(srv):
                srv.restart()

            def test_uses_it_after(srv):
                assert srv.get_json("/health")
            """
        )
    )
    _run_with_the_plugin(pytester, monkeypatch).assert_outcomes(passed=2)


def test_an_orphaned_grandchild_is_still_found_as_a_descendant():
    """A grandchild whose parent exited is adopted (subreaper) and still reported, so it cannot hide."""
    script = (
        "import subprocess, sys; "
        "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL); "
        "print(p.pid)"
    )
    before = set(process_leaks.live_descendants())
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    grandchild = int(out.stdout)
    try:
        assert grandchild in process_leaks.leaked_since(before, grace_s=0)
    finally:
        process_leaks.kill_all({grandchild: ""})
        os.waitpid(grandchild, 0)  # adopted: ours to reap

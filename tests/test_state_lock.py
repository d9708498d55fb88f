"""One Talaria per state folder: the second refuses and names the holder; a crash releases the folder."""

from __future__ import annotations

import subprocess
import sys

import pytest

from api.store import state_lock
from talaria_testing.server_proc import ServerProc


def test_a_second_server_on_the_same_state_folder_refuses_to_start_and_names_the_first(tmp_path):
    first = ServerProc(tmp_path)
    with first:
        second = ServerProc(tmp_path)
        with pytest.raises(RuntimeError) as caught:
            second.start()
        message = str(caught.value)
        assert "exit 1" in message and "in use by process" in message
        assert f"process {first.proc.pid} " in message and "server.py" in message
        assert first.get_json("/health")  # the first one keeps serving
        first.kill()  # a crash: the kernel releases the lock
        with second:
            assert second.get_json("/health")


def test_the_lock_is_not_inherited_by_programs_the_holder_starts(tmp_path):
    state_lock.acquire(tmp_path)
    try:
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
        try:
            state_lock.release(tmp_path)
            state_lock.acquire(tmp_path)  # the running child does not hold it
        finally:
            child.kill()
            child.wait()
    finally:
        state_lock.release(tmp_path)


def test_a_busy_folder_is_refused_in_another_process_with_this_pid(tmp_path):
    import os

    state_lock.acquire(tmp_path)
    try:
        code = f"from api.store import state_lock; state_lock.hold_or_exit({str(tmp_path)!r})"
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
        assert done.returncode == 1
        assert f"in use by process {os.getpid()} " in done.stderr
    finally:
        state_lock.release(tmp_path)


def test_a_file_system_without_locks_is_served_with_a_warning(tmp_path, monkeypatch, caplog):
    import errno

    def no_locks(fd, op):
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(state_lock.fcntl, "flock", no_locks)
    state_lock.hold_or_exit(tmp_path)  # does not exit
    assert "would not be refused" in caplog.text

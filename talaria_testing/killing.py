"""Parent side of the kill tests: start a child, wait for the moment, SIGKILL it, collect what it reported."""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

_PRELOAD = [
    "pytest",
    "api.store.models",
    "api.services.compression",
    "api.services.session_ops",
    "api.services.session_catalogue",
    "api.services.session_recovery",
    "api.rules.reconcile",
    "api.web.routes",
    "talaria_testing.hostile",
    "api.services.streaming",
    "talaria_testing.scripted_turns",
    "talaria_testing.crash_child",
    "talaria_testing.scenarios",
    "talaria_testing.promises",
]
_CTX = None


def fork_context():
    """One forkserver for the whole test run, with the store preloaded (a child starts in milliseconds)."""
    global _CTX
    if _CTX is None:
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(_PRELOAD)
        _CTX = ctx
    return _CTX


def _configured_child(target: Callable, *args: object) -> None:
    """Run ``target`` in the child as an entry point would: ``api.store.config`` configured from the environment."""
    from api.store import config

    config.configure(config.load_settings())
    target(*args)


def run_child(
    target: Callable,
    args: tuple,
    *,
    until: Callable[[object], bool],
    delay: float = 0.0,
    timeout: float = 60.0,
) -> tuple[list, bool]:
    """Run ``target(*args, conn)``; once a message satisfies ``until`` wait ``delay`` s, then SIGKILL.

    Returns every message the child sent (including those still in the pipe at the kill) and whether
    ``until`` was met (False: the child exited or timed out first).
    """
    ctx = fork_context()
    reader, writer = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_configured_child, args=(target, *args, writer), daemon=True)
    proc.start()
    writer.close()
    messages: list = []
    reached = False
    deadline = time.monotonic() + timeout
    try:
        while not reached:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not reader.poll(remaining):
                break
            try:
                msg = reader.recv()
            except EOFError:
                break
            messages.append(msg)
            reached = until(msg)
        if reached and delay > 0:
            time.sleep(delay)
    finally:
        if proc.is_alive():
            try:
                os.kill(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        proc.join(30)
        try:
            while reader.poll(0):
                messages.append(reader.recv())
        except (EOFError, OSError):
            pass
        reader.close()
    return messages, reached


def drop_caches(root: Path) -> None:
    """Evict the folder's files from the page cache, so recovery reads what the disk holds.

    Per file (``posix_fadvise(DONTNEED)`` after an ``fsync``) rather than the machine-wide
    ``/proc/sys/vm/drop_caches``, which would slow every other process on the host.
    """
    if not hasattr(os, "posix_fadvise"):
        return
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            path = os.path.join(dirpath, name)
            try:
                fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
            except OSError:
                continue
            try:
                os.fsync(fd)
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            except OSError:
                pass
            finally:
                os.close(fd)

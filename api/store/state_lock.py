"""One Talaria per state folder: an exclusive OS lock on ``<state_dir>/talaria.lock``.

``flock`` belongs to the open file, so the kernel releases it when the process ends, a crash included;
nothing is ever stale. The descriptor is close-on-exec, so a command a tool started cannot keep the lock
after the server is gone. The holder writes its pid and command line into the file for the refusal
message of the next one.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import sys
import time
from pathlib import Path

LOCK_NAME = "talaria.lock"
log = logging.getLogger("talaria.state_lock")

# lock path -> open descriptor, kept for the life of the process: the OS lock is the process's (taken before any
# app is built), not an app's.
_HELD: dict[Path, int] = {}


class StateDirBusy(RuntimeError):
    """Another process holds the state folder."""


def _describe_holder(fd: int) -> str:
    try:
        info = json.loads(os.pread(fd, 4096, 0) or b"{}")
    except (OSError, ValueError):
        info = {}
    if not isinstance(info, dict) or not isinstance(info.get("pid"), int):
        return "another process"
    started = info.get("started_at")
    when = time.strftime(" since %Y-%m-%d %H:%M:%S", time.localtime(started)) if started else ""
    command = info.get("command")
    return f"process {info['pid']}" + (f" ({command})" if command else "") + when


def acquire(state_dir: Path) -> Path:
    """Hold ``state_dir`` for this process; raise ``StateDirBusy`` naming the holder when another has it."""
    state_dir = Path(state_dir)
    state_dir.mkdir(parents=True, exist_ok=True)
    path = state_dir / LOCK_NAME
    if path in _HELD:
        return path
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = _describe_holder(fd)
        os.close(fd)
        raise StateDirBusy(
            f"the state folder {state_dir} is in use by {holder}; stop it or choose another state folder"
        ) from None
    except OSError as exc:  # a file system without locks (some network mounts): serve, but say so
        os.close(fd)
        log.warning("could not lock %s (%s); a second Talaria on this folder would not be refused", path, exc)
        return path
    except BaseException:
        os.close(fd)
        raise
    info = {"pid": os.getpid(), "command": " ".join(sys.argv)[:300], "started_at": time.time()}
    os.ftruncate(fd, 0)
    os.pwrite(fd, json.dumps(info).encode("utf-8"), 0)
    _HELD[path] = fd
    return path


def holder(state_dir: Path) -> str | None:
    """Who holds ``state_dir`` now (``process <pid> (<command>) since …``), or None; changes nothing."""
    try:
        fd = os.open(Path(state_dir) / LOCK_NAME, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return _describe_holder(fd)
    finally:
        os.close(fd)  # closing drops the shared lock taken to look
    return None


def release(state_dir: Path) -> None:
    """Give the folder up (the process ending does the same)."""
    fd = _HELD.pop(Path(state_dir) / LOCK_NAME, None)
    if fd is not None:
        os.close(fd)


def hold_or_exit(state_dir: Path) -> None:
    """``acquire`` for the server's start-up: a busy folder ends the process with the reason."""
    try:
        acquire(state_dir)
    except StateDirBusy as exc:
        print(f"talaria: {exc}", file=sys.stderr)
        raise SystemExit(1) from None

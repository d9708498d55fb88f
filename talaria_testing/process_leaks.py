"""Find processes a test started and left running (servers, fake LLMs, their children).

The test process makes itself a child subreaper, so a grandchild whose parent died (a server killed with
SIGKILL while its tool ran a command) is re-parented to it and still counts as its descendant.
"""

from __future__ import annotations

import ctypes
import os
import signal
import time
from pathlib import Path

_PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> bool:
    """Adopt orphaned descendants (Linux); False where the call is not available."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _stat_fields(pid: str) -> tuple[int, str] | None:
    """(parent pid, state letter) of a process, None when it is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    after_name = raw[raw.rfind(")") + 2 :].split()
    return int(after_name[1]), after_name[0]


def live_descendants(root: int | None = None) -> dict[int, str]:
    """``{pid: command line}`` of every running (non-zombie) descendant of ``root`` (default: this process)."""
    root = os.getpid() if root is None else root
    children: dict[int, list[int]] = {}
    states: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        fields = _stat_fields(entry)
        if fields is None:
            continue
        children.setdefault(fields[0], []).append(int(entry))
        states[int(entry)] = fields[1]
    found: dict[int, str] = {}
    stack = list(children.get(root, ()))
    while stack:
        pid = stack.pop()
        stack.extend(children.get(pid, ()))
        if states.get(pid) in ("Z", "X"):
            continue
        found[pid] = _command_line(pid)
    return found


def _command_line(pid: int) -> str:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return "?"
    return raw.replace(b"\0", b" ").decode("utf-8", "replace").strip()[:200] or "?"


def leaked_since(before: set[int], grace_s: float = 5.0) -> dict[int, str]:
    """Descendants started after ``before`` that are still running once ``grace_s`` has passed."""
    deadline = time.monotonic() + grace_s
    while True:
        leaked = {pid: cmd for pid, cmd in live_descendants().items() if pid not in before}
        if not leaked or time.monotonic() >= deadline:
            return leaked
        time.sleep(0.05)


def kill_all(pids: dict[int, str]) -> None:
    """SIGKILL each leaked process, so one leak does not spill into the next test."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

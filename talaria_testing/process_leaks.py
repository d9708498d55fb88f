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
# Python's own helpers: started on first use, they live until the interpreter exits (their children count).
_INTERPRETER_HELPERS = (
    "from multiprocessing.forkserver import main",
    "from multiprocessing.resource_tracker import main",
)


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


def _process_table() -> dict[int, tuple[int, str]]:
    table: dict[int, tuple[int, str]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            fields = _stat_fields(entry)
            if fields is not None:
                table[int(entry)] = fields
    return table


def live_descendants(root: int | None = None) -> dict[int, int]:
    """``{pid: parent pid}`` of every running (non-zombie) descendant of ``root`` (default: this process)."""
    root = os.getpid() if root is None else root
    table = _process_table()
    children: dict[int, list[int]] = {}
    for pid, (ppid, _state) in table.items():
        children.setdefault(ppid, []).append(pid)
    found: dict[int, int] = {}
    stack = list(children.get(root, ()))
    while stack:
        pid = stack.pop()
        stack.extend(children.get(pid, ()))
        if table[pid][1] not in ("Z", "X"):
            found[pid] = table[pid][0]
    return found


def _command_line(pid: int) -> str:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return "?"
    return raw.replace(b"\0", b" ").decode("utf-8", "replace").strip()[:200] or "?"


def _started_since(current: dict[int, int], before: set[int]) -> dict[int, str]:
    """New processes whose every ancestor up to us is new too (a long-lived fixture's helpers belong to it)."""
    out: dict[int, str] = {}
    for pid in current:
        if pid in before:
            continue
        ancestor = current[pid]
        while ancestor in current and ancestor not in before:
            ancestor = current[ancestor]
        if ancestor in before:
            continue
        command = _command_line(pid)
        if not any(helper in command for helper in _INTERPRETER_HELPERS):
            out[pid] = command
    return out


def leaked_since(before: set[int], grace_s: float = 5.0) -> dict[int, str]:
    """``{pid: command}`` of processes started after ``before`` that still run once ``grace_s`` has passed."""
    deadline = time.monotonic() + grace_s
    while True:
        leaked = _started_since(live_descendants(), before)
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

"""CPU time of a process and of every process under it, read from ``/proc`` (benches import it).

A server whose agent turns run in child processes spends its stream's CPU in both; the children's
share counts whether they are still running (their own ``stat``) or already reaped (the parent's
``cutime``/``cstime``)."""

from __future__ import annotations

import os
from pathlib import Path

_TICKS = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> list[str] | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of ``pid`` alone."""
    fields = _stat(pid)
    return 0.0 if fields is None else (int(fields[11]) + int(fields[12])) / _TICKS


def descendants(pid: int) -> list[int]:
    """Every live process under ``pid``."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            fields = _stat(int(entry))
            if fields is not None:
                children.setdefault(int(fields[1]), []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def tree_cpu_seconds(pid: int) -> tuple[float, float]:
    """CPU seconds of ``pid`` itself, and of its descendants (live ones plus those it has reaped)."""
    fields = _stat(pid)
    if fields is None:
        return 0.0, 0.0
    own = (int(fields[11]) + int(fields[12])) / _TICKS
    reaped = (int(fields[13]) + int(fields[14])) / _TICKS
    return own, reaped + sum(cpu_seconds(child) for child in descendants(pid))

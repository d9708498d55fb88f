"""Every state a power loss may leave after a recorded write path (in the style of ALICE and CrashMonkey).

The model (conservative: what POSIX promises, not what ext4 happens to do):

1. **Crash points.** The machine may lose power after any prefix of the recorded operations: before
   the first, between any two, after the last.
2. **File data.** Bytes written to a file are durable only once that file is fsynced (``fsync`` or
   ``fdatasync``). At a crash, a file whose data changed since its last fsync may hold: its data at
   that fsync; all of the new data; the old data plus the first half of what was appended; the old
   data plus zeros for the appended length (the size reached the disk, the blocks did not). A file
   truncated and rewritten may also be empty, half written, or all zeros.
3. **Directory operations** (create, rename, link, unlink, mkdir, rmdir) are each atomic, and durable
   only once the directory they change is fsynced (a rename across folders needs both folders).
   Until that barrier any subset of the pending ones may have reached the disk, **in any order**: an
   order is kept only if each operation's names exist when it is applied (a rename whose source was
   never created cannot have happened). An fsync of a file does not make its directory entry durable.
4. **Bounds.** With more than ``PERMUTE_MAX`` pending directory operations only subsets in program
   order are tried, beyond ``SUBSET_MAX`` only prefixes; at most ``DATA_COMBOS_MAX`` combinations of
   file contents per namespace. The generator counts when a bound applied (``bounded``).

:func:`crash_states` yields each state as ``CrashState(point, dirs, files)``; states repeat across
crash points, so callers dedupe by :attr:`CrashState.key`.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from talaria_testing.fsrecorder import FsRecorder, Op, parent

PERMUTE_MAX = 5
SUBSET_MAX = 12
DATA_COMBOS_MAX = 64


@dataclass(frozen=True)
class CrashState:
    point: int  # how many recorded operations ran before the power went
    dirs: frozenset[str]
    files: dict = field(hash=False, compare=False)

    @property
    def key(self) -> str:
        h = hashlib.sha1()
        for d in sorted(self.dirs):
            h.update(b"D" + d.encode() + b"\0")
        for rel in sorted(self.files):
            h.update(b"F" + rel.encode() + b"\0" + hashlib.sha1(self.files[rel]).digest())
        return h.hexdigest()


def materialise(state: CrashState, dest: Path) -> None:
    """Write the state out as a folder ``dest`` (new), the way the disk would hold it after the crash."""
    dest.mkdir()
    for d in sorted(state.dirs, key=lambda d: d.count("/")):
        if d != ".":
            (dest / d).mkdir(exist_ok=True)
    for rel, data in state.files.items():
        (dest / rel).write_bytes(data)


def data_variants(durable: bytes, current: bytes) -> list[bytes]:
    """What an un-fsynced file may hold after a crash (model rule 2)."""
    if current == durable:
        return [current]
    out = [durable, current]
    if current.startswith(durable):
        tail = current[len(durable) :]
        out += [durable + tail[: len(tail) // 2], durable + b"\0" * len(tail)]
    else:
        out += [b"", current[: len(current) // 2], b"\0" * len(current)]
    seen: list[bytes] = []
    for v in out:
        if v not in seen:
            seen.append(v)
    return seen


def _needs(op: Op) -> set[str]:
    if op.kind == "rename":
        return {parent(op.path), parent(op.dst)}
    if op.kind == "link":
        return {parent(op.dst)}
    return {parent(op.path)}


def _apply(op: Op, names: dict[str, int], dirs: set[str]) -> bool:
    """Apply one directory operation to a namespace; False when its names do not exist (an impossible order)."""
    if op.kind == "create":
        if parent(op.path) not in dirs or op.path in names:
            return False
        names[op.path] = op.ino
    elif op.kind == "rename":
        if names.get(op.path) != op.ino or parent(op.dst) not in dirs:
            return False
        del names[op.path]
        names[op.dst] = op.ino
    elif op.kind == "link":
        if names.get(op.path) != op.ino or parent(op.dst) not in dirs or op.dst in names:
            return False
        names[op.dst] = op.ino
    elif op.kind == "unlink":
        if names.get(op.path) != op.ino:
            return False
        del names[op.path]
    elif op.kind == "mkdir":
        if parent(op.path) not in dirs or op.path in dirs:
            return False
        dirs.add(op.path)
    elif op.kind == "rmdir":
        if (
            op.path not in dirs
            or any(parent(n) == op.path for n in names)
            or any(parent(d) == op.path for d in dirs)
        ):
            return False
        dirs.discard(op.path)
    return True


class _Pending:
    def __init__(self, op: Op):
        self.op = op
        self.needs = _needs(op)


@dataclass
class Stats:
    points: int = 0
    generated: int = 0
    impossible_orders: int = 0
    bounded: int = 0


def _orders(pending: list[_Pending], stats: Stats) -> Iterator[tuple[_Pending, ...]]:
    n = len(pending)
    if n <= PERMUTE_MAX:
        for k in range(n + 1):
            yield from itertools.permutations(pending, k)
        return
    stats.bounded += 1
    if n <= SUBSET_MAX:
        for k in range(n + 1):
            yield from itertools.combinations(pending, k)
        return
    for k in range(n + 1):
        yield tuple(pending[:k])


def crash_states(rec: FsRecorder, stats: Stats | None = None) -> Iterator[CrashState]:
    """Every crash state of the recorded operations under the model above."""
    stats = stats if stats is not None else Stats()
    data: dict[int, bytes] = {ino: rec.initial_files[rel] for rel, ino in rec.initial_inodes.items()}
    durable: dict[int, bytes] = dict(data)
    dur_names: dict[str, int] = dict(rec.initial_inodes)
    dur_dirs: set[str] = set(rec.initial_dirs)
    pending: list[_Pending] = []
    log = rec.log
    for point in range(len(log) + 1):
        stats.points += 1
        yield from _states_at(point, data, durable, dur_names, dur_dirs, pending, stats)
        if point == len(log):
            break
        op = log[point]
        if op.kind == "create":
            data[op.ino] = b""
            durable[op.ino] = b""
            pending.append(_Pending(op))
        elif op.kind == "trunc":
            data[op.ino] = b""
        elif op.kind == "write":
            buf = bytearray(data.get(op.ino, b""))
            end = op.offset + len(op.data)
            if len(buf) < end:
                buf.extend(b"\0" * (end - len(buf)))
            buf[op.offset : end] = op.data
            data[op.ino] = bytes(buf)
        elif op.kind == "fsync":
            durable[op.ino] = data.get(op.ino, b"")
        elif op.kind == "fsync_dir":
            for p in pending:
                p.needs.discard(op.path)
            still: list[_Pending] = []
            for p in pending:  # program order: a durable operation lands on what the earlier ones left
                if p.needs or not _apply(p.op, dur_names, dur_dirs):
                    still.append(p)
            pending[:] = still
        else:
            pending.append(_Pending(op))


def _states_at(point, data, durable, dur_names, dur_dirs, pending, stats) -> Iterator[CrashState]:
    for order in _orders(list(pending), stats):
        names = dict(dur_names)
        dirs = set(dur_dirs)
        if not all(_apply(p.op, names, dirs) for p in order):
            stats.impossible_orders += 1
            continue
        reachable = sorted(set(names.values()))
        choices = [data_variants(durable.get(ino, b""), data.get(ino, b"")) for ino in reachable]
        for k, combo in enumerate(itertools.product(*choices)):
            if k >= DATA_COMBOS_MAX:
                stats.bounded += 1
                break
            content = dict(zip(reachable, combo, strict=True))
            stats.generated += 1
            yield CrashState(point, frozenset(dirs), {rel: content[ino] for rel, ino in names.items()})

"""What a checkpoint store answers, as data: a checkpoint of a folder, a file changed between two of them,
and the parsing of git's answers (``log -z``, ``diff --raw --numstat -z``). The same for the agent's store on
this machine (``api.agent.checkpoint_store``) and the store kept on another host
(``api.services.remote_checkpoints``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeGuard


@dataclass(frozen=True)
class Point:
    hash: str
    at: int  # unix seconds (git's commit date)
    reason: str


@dataclass(frozen=True)
class FileChange:
    path: str  # relative to the checkpointed folder
    status: str  # "added" | "modified" | "deleted"
    insertions: int
    deletions: int
    binary: bool


_STATUS = {"A": "added", "D": "deleted"}
_HEX = frozenset("0123456789abcdef")


def is_commit_hash(value: object) -> TypeGuard[str]:
    """Whether ``value`` can name a commit: 4 to 64 lowercase hexadecimal characters."""
    return isinstance(value, str) and 4 <= len(value) <= 64 and set(value) <= _HEX


def points(records: list[str]) -> list[Point]:
    """Checkpoints from ``log --format=%H|%ct|%s`` records, in their order; a malformed record is left out."""
    rows = []
    for line in records:
        commit, at, reason = (line.strip("\n").split("|", 2) + ["", ""])[:3]
        if is_commit_hash(commit) and at.isdigit():
            rows.append(Point(commit, int(at), reason))
    return rows


def changes(out: str) -> list[FileChange]:
    """The files of ``diff --raw --numstat -z --no-renames``: every raw record (":modes shas STATUS\\0path\\0"),
    then every numstat record ("ins\\tdel\\tpath\\0"), in the same order."""
    tokens = out.split("\0")
    statuses: list[tuple[str, str]] = []
    counts: dict[str, tuple[int, int, bool]] = {}
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if token.startswith(":") and i + 1 < len(tokens):
            statuses.append((tokens[i + 1], _STATUS.get(token.rsplit(" ", 1)[-1][:1], "modified")))
            i += 2
            continue
        parts = token.split("\t", 2)
        if len(parts) == 3:
            binary = parts[0] == "-"
            counts[parts[2]] = (0 if binary else int(parts[0]), 0 if binary else int(parts[1]), binary)
        i += 1
    return [FileChange(path, status, *counts.get(path, (0, 0, False))) for path, status in statuses]

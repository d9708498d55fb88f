"""``git status --porcelain=v1 -z`` read as the files panel's entries: each path with what happened to it
against HEAD, in words, and whether it is staged."""

from __future__ import annotations

from typing import Any

STATUS_MAX = 5_000  # entries
DIFF_MAX_CHARS = 400_000  # of a diff shown
# Porcelain status letters → words.
_STATES = {
    "M": "modified",
    "A": "added",
    "D": "deleted",
    "R": "renamed",
    "C": "copied",
    "T": "type changed",
    "U": "conflict",
}


def _entry(line: str) -> dict[str, str]:
    index, tree, path = line[0], line[1], line[3:]
    if index == "?":
        return {"path": path, "state": "new"}
    letter = tree if tree != " " else index
    return {"path": path, "state": _STATES.get(letter, "changed"), "staged": "yes" if index != " " else "no"}


def entries(raw: str) -> dict[str, Any]:
    """``{entries: [{path, state, staged?}], truncated}`` of porcelain v1 output (``-z``); at most
    ``STATUS_MAX`` entries, and a record too short to be one is skipped."""
    items = [item for item in raw.split("\0") if item]
    found: list[dict[str, str]] = []
    at = 0
    while at < len(items) and len(found) < STATUS_MAX:
        item = items[at]
        at += 2 if item[:1] in ("R", "C") else 1  # a rename's or copy's source path follows it
        if len(item) >= 4:
            found.append(_entry(item))
    return {"entries": found, "truncated": at < len(items)}

"""The sidebar's order, kept up to date one row at a time: pinned rows, then the others, each newest first.

A row's place is its key ``(updated_at, session_id)`` (the id breaks ties, so the order and a cursor made
of a key are total). The keys are held in two ascending lists, one for pinned rows and one for the rest:
a change moves one key (binary search, then one list insert or delete), and a page is a slice found by
binary search, so neither costs more with more sessions. The same two lists are kept per project
(``project_id``), so a project's page costs what an unfiltered page costs. Each row carries a slot for what a reader derives
from it (the sidebar's JSON); a changed row is a new entry, so the slot never outlives the row it was
derived from.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

Key = tuple[float, str]


def _number(value: Any) -> float:
    try:
        number = float(value or 0)
    except (TypeError, ValueError, OverflowError):
        return 0.0
    return 0.0 if math.isnan(number) else number  # NaN has no place in an order


def order_key(row: dict[str, Any]) -> Key:
    """Newest first by ``updated_at``; the id breaks ties so the order (and a cursor) is total."""
    return _number(row.get("updated_at")), str(row.get("session_id") or "")


class Entry:
    """One row in the order; ``derived`` is the reader's cache of something computed from ``row``."""

    __slots__ = ("derived", "key", "pinned", "project", "row")

    def __init__(self, sid: str, row: dict[str, Any]):
        self.row = row
        self.key = (_number(row.get("updated_at")), sid)
        self.pinned = bool(row.get("pinned"))
        project = row.get("project_id")
        self.project = project if isinstance(project, str) and project else None
        self.derived: Any = None


@dataclass(frozen=True)
class Page:
    """``pinned`` (first page only) and ``rows`` are newest first; ``next_key`` is the last row's key when
    older rows follow; ``total`` counts every row."""

    pinned: list[Entry]
    rows: list[Entry]
    next_key: Key | None
    total: int


class _Keys:
    """The ascending keys of one set of rows: pinned ones and the others."""

    __slots__ = ("others", "pinned")

    def __init__(self) -> None:
        self.pinned: list[Key] = []
        self.others: list[Key] = []

    def of(self, entry: Entry) -> list[Key]:
        return self.pinned if entry.pinned else self.others


class SidebarOrder:
    """Rows by session id, in sidebar order. Not thread-safe: the owner serialises calls."""

    def __init__(self, rows: dict[str, dict[str, Any]] | None = None):
        self._entries: dict[str, Entry] = {}
        self._all = _Keys()
        self._projects: dict[str, _Keys] = {}
        for sid, row in (rows or {}).items():
            entry = Entry(sid, row)
            self._entries[sid] = entry
            for keys in self._key_sets(entry):
                keys.of(entry).append(entry.key)
        for keys in (self._all, *self._projects.values()):
            keys.pinned.sort()
            keys.others.sort()

    def _key_sets(self, entry: Entry) -> tuple[_Keys, ...]:
        if entry.project is None:
            return (self._all,)
        return self._all, self._projects.setdefault(entry.project, _Keys())

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, sid: object) -> bool:
        return sid in self._entries

    def get(self, sid: str) -> dict[str, Any] | None:
        entry = self._entries.get(sid)
        return None if entry is None else entry.row

    def put(self, sid: str, row: dict[str, Any]) -> None:
        """Add ``row`` or replace the row held for ``sid``: its key moves to its new place."""
        self.remove(sid)
        entry = Entry(sid, row)
        self._entries[sid] = entry
        for keys in self._key_sets(entry):
            bisect.insort(keys.of(entry), entry.key)

    def remove(self, sid: str) -> None:
        entry = self._entries.pop(sid, None)
        if entry is None:
            return
        for keys in self._key_sets(entry):
            found = keys.of(entry)
            at = bisect.bisect_left(found, entry.key)
            if at < len(found) and found[at] == entry.key:
                del found[at]
        name = entry.project
        if name is not None and not (self._projects[name].pinned or self._projects[name].others):
            del self._projects[name]  # an emptied project keeps no lists

    def page(self, before: Key | None, limit: int | None, project: str | None = None) -> Page:
        """The first page (``before`` None: every pinned row, then ``limit`` others) or the ``limit``
        unpinned rows older than ``before``; no limit: all of them. With ``project``, only that project's
        rows, and ``total`` counts them."""
        keys = self._all if project is None else self._projects.get(project, _Keys())
        others = keys.others
        end = len(others) if before is None else bisect.bisect_left(others, before)
        start = 0 if limit is None else max(0, end - limit)
        rows = [self._entry(key) for key in reversed(others[start:end])]
        pinned = [self._entry(key) for key in reversed(keys.pinned)] if before is None else []
        next_key = others[start] if 0 < start < end else None
        total = len(self._entries) if project is None else len(keys.pinned) + len(others)
        return Page(pinned, rows, next_key, total)

    def in_project(self, project: str) -> list[str]:
        """The ids of a project's sessions, newest first: O(the project's size)."""
        keys = self._projects.get(project)
        return [] if keys is None else [sid for _, sid in sorted(keys.pinned + keys.others, reverse=True)]

    def newest_first(self) -> Iterator[dict[str, Any]]:
        """Every row, pinned or not, newest first. The keys are copied at the call, so the caller may walk
        the rows while others change them: a row removed since is skipped, a changed one is read as it is."""
        keys = self._all.pinned + self._all.others
        return self._rows_of(keys)

    def _rows_of(self, keys: list[Key]) -> Iterator[dict[str, Any]]:
        keys.sort(reverse=True)  # two sorted runs: merged in one linear pass
        for _, sid in keys:
            entry = self._entries.get(sid)
            if entry is not None:
                yield entry.row

    def _entry(self, key: Key) -> Entry:
        return self._entries[key[1]]

"""Fast lookups for the append-only merge (``api.reconcile``) and the context delta (``api.context_view``).

The indexes group registered rows (transcript rows plus the state rows a merge has added so far) by
one fact and load the transcript side only when a lookup could hit it; ``_raw_prefix`` finds the
leading run where two row lists agree on raw content and role, column-wise at C speed.
"""

from __future__ import annotations

from itertools import compress, repeat
from operator import eq, is_not, not_
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from api.reconcile import _Merge


class _Index:
    """Handles grouped by one fact; local rows are loaded only when a lookup could hit one."""

    def __init__(self, merge: _Merge, fact: str):
        self.merge, self.fact = merge, fact
        self.table: dict = {}
        self.local_loaded = False
        self.state_upto = 0

    def _value(self, h: int) -> Any:
        return self.merge.stable_key(h) if self.fact == "mid" else self.merge.t.fact(self.fact, h)

    def get(self, value: Any, with_local: bool = True) -> list:
        merge = self.merge
        if with_local and not self.local_loaded:
            self.local_loaded = True
            for h in range(merge.n):
                v = self._value(h)
                if v is not None:
                    self.table.setdefault(v, []).append(h)
        registered = merge.registered_state
        while self.state_upto < len(registered):
            h = registered[self.state_upto]
            v = self._value(h)
            if v is not None:
                self.table.setdefault(v, []).append(h)
            self.state_upto += 1
        return self.table.get(value, [])


class _FingerprintIndex:
    """Registered rows by fingerprint. A few lookups scan the local list at C speed; many build a dict."""

    def __init__(self, merge: _Merge):
        self.merge = merge
        self.local: list | None = None
        self.table: dict | None = None
        self.scans = 0
        self.state: dict = {}
        self.state_upto = 0

    def local_list(self) -> list:
        if self.local is None:
            self.local = self.merge.t.local_fingerprints()
        return self.local

    def get(self, fp: str | None) -> list:
        if fp is None:
            return []
        local = self.local_list()
        if self.table is None and self.scans < 16:
            self.scans += 1
            found, i = [], -1
            while True:
                try:
                    i = local.index(fp, i + 1)
                except ValueError:
                    break
                found.append(i)
        else:
            if self.table is None:
                self.table = {}
                for h, v in enumerate(local):
                    if v is not None:
                        self.table.setdefault(v, []).append(h)
            found = list(self.table.get(fp, ()))
        registered, t = self.merge.registered_state, self.merge.t
        while self.state_upto < len(registered):
            h = registered[self.state_upto]
            if t.fp(h) is not None:
                self.state.setdefault(t.fp(h), []).append(h)
            self.state_upto += 1
        return found + self.state.get(fp, [])


def _raw_prefix(state: list, local: list, columns: frozenset[str]) -> tuple[int, set[int], list] | None:
    """The leading run where state and local rows have equal raw content and role, at C speed.

    Returns (run length, rows in it that need a closer look, state contents): rows with non-text
    content, any of the keys ``columns`` on either side, or (state user rows) a possible workspace
    tag. ``None`` when a row is not a dict.
    """
    try:
        contents = list(map(dict.get, state, repeat("content")))
        roles = list(map(dict.get, state, repeat("role")))
        length = min(
            _common_prefix(contents, list(map(dict.get, local, repeat("content")))),
            _common_prefix(roles, list(map(dict.get, local, repeat("role")))),
        )
        del contents[length:], roles[length:]
        state, local = state[:length], local[:length]
        closer = set(compress(range(length), map(is_not, map(type, contents), repeat(str))))
        closer.update(compress(range(length), map(not_, map(columns.isdisjoint, state))))
        closer.update(compress(range(length), map(not_, map(columns.isdisjoint, local))))
    except TypeError:
        return None
    users = [i for i in compress(range(length), map(eq, roles, repeat("user"))) if i not in closer]
    if any(c == "[" or c.isspace() for c in {contents[i][:1] for i in users}):  # maybe a workspace tag
        closer.update(i for i in users if contents[i][:1] == "[" or contents[i][:1].isspace())
    return length, closer, contents


def _common_prefix(a: list, b: list) -> int:
    if a == b:  # identical columns compare by identity, almost for free
        return len(a)
    same = list(map(eq, a, b))
    return same.index(False) if False in same else min(len(a), len(b))

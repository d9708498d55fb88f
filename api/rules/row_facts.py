"""Per-row facts of one reconciliation call and the row equivalences built on them (docs/reconciliation.md,
"Message keys", "Fuzzy likeness", "Speed").

``Rows`` holds the local (transcript or context) rows and the state rows of one merge or context delta and
computes each row's facts (time, collapsed text, keys, fingerprint) the first time a rule asks, at most once
per call; ``same_content``, ``same_visible`` and ``fuzzy_visible`` compare two rows from the raw fields first
and build keys only when those cannot decide. Pure: rows come in as arguments.
"""

from __future__ import annotations

import math
from itertools import repeat
from operator import is_
from typing import Any

from api.rules.message_keys import (
    RECENT_LISTS,
    api_content,
    build_content_key,
    build_merge_key,
    build_visible_key,
    collapse,
    fingerprint,
    forget_with_memos,
    same_json,
    side_text,
    strip_workspace_tag,
    tokens,
    tool_calls_json,
    valid_row_id,
)
from api.rules.messages import content_as_text, merge_timestamp, parse_timestamp

_MISSING = object()


def newest_time(values: list[Any]) -> float | None:
    """The largest of these times that parses (``parse_timestamp``), or ``None``.

    Every chat turn asks about the same transcript's times, a few rows longer: the answer for a list whose
    first values are the very objects of a list asked about before reads only the newer values.
    """
    for k, (known, best) in enumerate(_RECENT_TIMES):
        if len(known) <= len(values) and all(map(is_, known, values)):
            if k == 0 and len(known) == len(values):
                return best  # the list asked about last
            newer = _newest(values[len(known) :])
            if newer is not None and (best is None or newer > best):
                best = newer
            del _RECENT_TIMES[k]
            break
    else:
        best = _newest(values)
    _RECENT_TIMES.insert(0, (list(values), best))
    del _RECENT_TIMES[RECENT_LISTS:]
    return best


_RECENT_TIMES: list[tuple[list[Any], float | None]] = []  # a cache of a pure function, not state
forget_with_memos(_RECENT_TIMES.clear)


def _newest(values: list[Any]) -> float | None:
    times: list[float] = values
    if not values or set(map(type, values)) != {float}:
        times = [t for v in values if (t := parse_timestamp(v)) is not None]
    best = max(times, default=None)
    if best is not None and not math.isfinite(best):  # an inf or nan decided max(): filter (rare)
        best = max((v for v in times if math.isfinite(v)), default=None)
    return best


def same_raw_content(state_row: dict[str, Any], local_row: dict[str, Any]) -> bool:
    """The raw fields show the content keys of a state row and a local row equal: the same text, as is on
    both sides (no workspace tag to drop), role, tool call id and tool name, and no ``api_content``.
    ``False`` may be unsure."""
    a, b = state_row, local_row
    ca = a.get("content")
    return (
        type(ca) is str
        and ca == b.get("content")
        and a.get("role") == b.get("role")
        and (a.get("tool_call_id") or "") == (b.get("tool_call_id") or "")
        and (a.get("tool_name") or a.get("name") or "") == (b.get("tool_name") or b.get("name") or "")
        and not a.get("api_content")
        and not b.get("api_content")
        and (a.get("role") != "user" or strip_workspace_tag(ca) is ca)
    )


class Rows:
    """Local rows (handles ``0..n-1``, sidecar side) then state rows (state side).

    Each fact is computed the first time a rule asks for it and kept for the rest of the call.
    """

    def __init__(self, local: list[Any], state: list[Any]):
        self.rows = local + state
        self.transcript_len = len(local)
        size = len(self.rows)
        self._ts = [_MISSING] * size
        self._fp = [_MISSING] * size
        self._facts: dict[tuple[str, int], Any] = {}

    def role(self, handle: int) -> Any:
        row = self.rows[handle]
        return row.get("role") if isinstance(row, dict) else None

    def ts(self, handle: int) -> float | None:
        value = self._ts[handle]
        if value is _MISSING:
            value = self._ts[handle] = merge_timestamp(self.rows[handle])
        return value  # type: ignore[return-value]  # _MISSING was replaced above

    def fingerprint(self, handle: int) -> str | None:
        """Fingerprint of the row's side text (``None`` for a non-dict row)."""
        value = self._fp[handle]
        if value is _MISSING:
            row = self.rows[handle]
            value = self._fp[handle] = (
                fingerprint(side_text(row, handle >= self.transcript_len)) if isinstance(row, dict) else None
            )
        return value  # type: ignore[return-value]  # _MISSING was replaced above

    def local_fingerprints(self) -> list[Any]:
        """Fingerprints of every local row, through the memo at C speed when the rows allow it."""
        local = self.rows[: self.transcript_len]
        try:
            fps = list(map(fingerprint.cache.get, map(dict.get, local, repeat("content"))))
        except TypeError:  # a non-dict row or unhashable content: take the ordinary path
            fps = [self.fingerprint(handle) for handle in range(self.transcript_len)]
        else:
            if None in fps:
                for handle in [handle for handle, v in enumerate(fps) if v is None]:
                    fps[handle] = self.fingerprint(handle)
        self._fp[: self.transcript_len] = fps
        return fps

    def local_contents(self, handles: range | list[int]) -> list[Any]:
        """The ``content`` of these local (dict) rows."""
        if isinstance(handles, range):
            return list(map(dict.get, self.rows[: self.transcript_len], repeat("content")))
        return [self.rows[handle].get("content") for handle in handles]

    @staticmethod
    def local_norms(contents: list[Any]) -> list[str]:
        """Collapsed texts of local rows with these contents, through the memo at C speed when it has them."""
        try:
            norms: list[str | None] = list(map(collapse.cache.get, contents))
        except TypeError:  # unhashable content: the ordinary path
            return [collapse(content_as_text(content)) for content in contents]
        if None in norms:
            for i in [i for i, v in enumerate(norms) if v is None]:
                norms[i] = collapse(content_as_text(contents[i]))
        return norms  # type: ignore[return-value]  # every None was filled above

    def local_max_timestamp(self, values: list[Any] | None = None) -> float | None:
        """Newest parseable timestamp among local rows ("newest" in docs/reconciliation.md); ``values`` are
        their ``timestamp`` fields when the caller has them."""
        if values is None:
            values = [
                m.get("timestamp") if isinstance(m, dict) else None for m in self.rows[: self.transcript_len]
            ]
        return newest_time(values)

    def fact(self, kind: str, handle: int) -> Any:
        slot = (kind, handle)
        value = self._facts.get(slot, _MISSING)
        if value is _MISSING:
            value = self._facts[slot] = self._compute(kind, handle)
        return value

    def _compute(self, kind: str, handle: int) -> Any:
        row = self.rows[handle]
        if not isinstance(row, dict):
            return None if kind in ("rowid", "norm", "tokens", "tcj") else ("non_dict", repr(row))
        if kind == "norm":
            return collapse(side_text(row, handle >= self.transcript_len))
        if kind == "tokens":
            return tokens(self.fact("norm", handle))
        if kind == "tcj":
            return tool_calls_json(row)
        if kind == "rowid":
            return valid_row_id(row)
        if kind == "raw":
            return content_as_text(row.get("content"))
        if kind == "merge":
            return build_merge_key(row, self.fact("tcj", handle), False)
        if kind == "dedup":
            return build_merge_key(row, self.fact("tcj", handle), True)
        if kind == "content":
            return build_content_key(row, self.fact("norm", handle))
        if kind == "visible":
            return build_visible_key(row, self.fact("norm", handle), self.fact("tcj", handle))
        raise KeyError(kind)

    def same_content(self, state_handle: int, local_handle: int) -> bool:
        """Content keys of state row ``hs`` and local row ``hl`` are equal (raw fields first)."""
        a, b = self.rows[state_handle], self.rows[local_handle]
        if type(a) is dict and type(b) is dict:
            if same_raw_content(a, b):
                return True
            if self.fingerprint(state_handle) != self.fingerprint(local_handle):
                return False
        return bool(self.fact("content", state_handle) == self.fact("content", local_handle))

    def same_visible(self, state_handle: int, local_handle: int) -> bool:
        """Visible keys of state row ``hs`` and local row ``hl`` are equal (raw fields first)."""
        a, b = self.rows[state_handle], self.rows[local_handle]
        if type(a) is dict and type(b) is dict:
            ca = a.get("content")
            if type(ca) is str and ca == b.get("content") and a.get("role") == b.get("role"):
                calls_a, calls_b = a.get("tool_calls"), b.get("tool_calls")
                if (
                    ((not calls_a and not calls_b) or same_json(calls_a, calls_b))
                    and not a.get("api_content")
                    and not b.get("api_content")
                    and (a.get("role") != "user" or strip_workspace_tag(ca) is ca)
                ):
                    return True
            elif self.fingerprint(state_handle) != self.fingerprint(local_handle):
                return False
        return bool(self.fact("visible", state_handle) == self.fact("visible", local_handle))

    def fuzzy_visible(self, state_handle: int, local_handle: int, max_chars: int) -> bool:
        """Fuzzy likeness (docs/reconciliation.md): same role and api_content, one text (or word string)
        inside the other."""
        a, b = self.rows[state_handle], self.rows[local_handle]
        if not isinstance(a, dict) or not isinstance(b, dict) or a.get("role") != b.get("role"):
            return False
        if api_content(a) != api_content(b):
            return False
        x, y = self.fact("norm", state_handle), self.fact("norm", local_handle)
        if not x or not y or len(x) > max_chars or len(y) > max_chars:
            return False
        if (x in y) if len(x) <= len(y) else (y in x):
            return True
        tx, ty = self.fact("tokens", state_handle), self.fact("tokens", local_handle)
        if not tx or not ty:
            return False
        return (tx in ty) if len(tx) <= len(ty) else (ty in tx)

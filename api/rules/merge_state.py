"""The state of one append-only merge in progress and its lookups (docs/reconciliation.md, "The rules",
"Speed"): the rows by handle, the replay cursor, the rows absorbed, appended or inserted so far, the
indexes over them, and the outcomes (absorb, append, insert in time order).

``api.rules.reconcile._Merge`` adds the rules on top of this. Pure: the rows come in as arguments.
"""

from __future__ import annotations

from functools import cached_property
from itertools import repeat
from typing import Any

from api.rules.merge_index import TranscriptTexts, _FingerprintIndex, _Index, transcript_texts
from api.rules.message_keys import DISPLAY_ONLY_KEYS, api_content, stable_id, tokens
from api.rules.messages import parse_timestamp
from api.rules.row_facts import Rows

FUZZY_MAX_KEYS = 1000
FUZZY_MAX_CHARS = 200_000


def fuzzy_settled(replayed: int, texts: TranscriptTexts | None) -> bool | None:
    """Whether fuzzy likeness is allowed, when the number of transcript rows the replay walks or their texts
    (``texts``, the index of exactly those rows) settle it; ``None`` when the keys must be counted."""
    if replayed <= FUZZY_MAX_KEYS:
        return True
    if texts is not None and len(texts.texts) == replayed and len(texts.norm_set) > FUZZY_MAX_KEYS:
        return False  # distinct texts never exceed distinct visible keys
    return None


class MergeState:
    """One run of the append-only merge, without its rules. Rows are named by handles: transcript rows
    ``0..transcript_len-1``, then the state rows (``facts`` holds both and each row's keys, computed on
    first use)."""

    def __init__(self, sidecar: list[Any], state: list[Any], watermark: float | None, boundary: float | None):
        self.facts = Rows(sidecar, state)
        self.transcript_len = len(sidecar)
        self.watermark, self.boundary = watermark, boundary
        self._local_times: list[Any] | None = None
        try:  # the rows the replay walks: the transcript's dict rows (dict.get refuses any other row)
            self._local_times = list(map(dict.get, sidecar, repeat("timestamp")))
            self.replay_order: range | list[int] = range(self.transcript_len)
        except TypeError:
            self.replay_order = [
                handle for handle in range(self.transcript_len) if isinstance(sidecar[handle], dict)
            ]
        self.cursor = 0  # the replay's position in replay_order
        self.appended: list[int] = []
        self.out: list[int] | None = None  # output handles, materialised on the first insertion
        self.registered_state: list[int] = []
        self.matched_state: list[int] = []  # state rows absorbed by the screenshot mirror or the replay
        self._newest: float | None = None
        self._newest_known = False
        self._by_text = _Index(self, "raw")
        self._matched_ts: set[float | None] = set()
        self._matched_ts_upto = 0
        self._fuzzy_ok: bool | None = None
        self._texts: TranscriptTexts | None = None
        self._positions: dict[int, int] | None = None
        self._absorbed_as_duplicate: dict[tuple[Any, ...], int] = {}
        self._by_ts: dict[float, list[int]] | None = None
        self._mirrored: set[int] = set()

    # Indexes the path of a new turn's rows never asks: made on first use.

    @cached_property
    def _by_fingerprint(self) -> _FingerprintIndex:
        return _FingerprintIndex(self)

    @cached_property
    def _by_message_id(self) -> _Index:
        return _Index(self, "mid")

    @cached_property
    def _by_row_id(self) -> _Index:
        return _Index(self, "rowid")

    @cached_property
    def _matched(self) -> _Index:
        return _Index(self, "raw", self.matched_state)

    # -- facts about the whole transcript ---------------------------------------------------------

    @property
    def newest(self) -> float | None:
        """Newest parseable transcript timestamp."""
        if not self._newest_known:
            self._newest, self._newest_known = self.facts.local_max_timestamp(self._local_times), True
        return self._newest

    def stable_key(self, handle: int) -> str | None:
        row = self.facts.rows[handle]
        sid = stable_id(row) if isinstance(row, dict) else None
        return str(sid) if sid else None

    def replay_position(self, handle: int) -> int:
        if len(self.replay_order) == self.transcript_len:
            return handle
        if self._positions is None:
            self._positions = {candidate: i for i, candidate in enumerate(self.replay_order)}
        return self._positions[handle]

    def fuzzy_allowed(self) -> bool:
        """Fuzzy likeness only while the transcript has at most 1000 distinct visible keys."""
        if self._fuzzy_ok is None:
            replayed = len(self.replay_order)
            settled = fuzzy_settled(
                replayed, None if replayed <= FUZZY_MAX_KEYS else self._transcript_texts()
            )
            if settled is not None:
                self._fuzzy_ok = settled
            else:
                buckets = set(self._by_fingerprint.local_list())
                buckets.discard(None)
                if len(buckets) > FUZZY_MAX_KEYS:  # distinct fingerprints never exceed distinct keys
                    self._fuzzy_ok = False
                else:
                    self._fuzzy_ok = (
                        len({self.facts.fact("visible", handle) for handle in self.replay_order})
                        <= FUZZY_MAX_KEYS
                    )
        return self._fuzzy_ok

    # -- lookups among registered rows (transcript + state rows added so far) ----------------------

    def _local_impossible(self, handle: int, kind: str) -> bool:
        """A legacy merge/dedup key of a row newer than every transcript row cannot match a transcript row."""
        ts = self.facts.ts(handle)
        if ts is None:
            return False
        newest = self.newest
        if kind == "dedup":
            return newest is None or ts > newest
        return ts >= 1 and (newest is None or int(ts) > newest)

    def find(self, kind: str, handle: int, not_after: float | None = None) -> int | None:
        """A registered row whose ``kind`` key equals this row's (optionally one not newer than ``not_after``)."""
        facts = self.facts
        key = facts.fact(kind, handle)
        if key[0] == "message_id":
            candidates = self._by_message_id.get(key[1])
        elif kind in ("merge", "dedup"):
            candidates = self._by_text.get(
                facts.fact("raw", handle), with_local=not self._local_impossible(handle, kind)
            )
        else:
            candidates = self._by_fingerprint.get(facts.fingerprint(handle))
        for candidate in candidates:
            when = facts.ts(candidate)
            if facts.fact(kind, candidate) == key and (
                not_after is None or when is None or when <= not_after
            ):
                return candidate
        return None

    def _visible_duplicate(self, handle: int) -> bool:
        """Visible duplicate: a transcript row with the same (or a fuzzily alike) visible key is still unabsorbed."""
        facts, cursor = self.facts, self.cursor
        if cursor >= len(self.replay_order) or not isinstance(facts.rows[handle], dict):
            return False  # every transcript row was already counted by the replay
        key = facts.fact("visible", handle)
        same = [
            candidate
            for candidate in self._by_fingerprint.get(facts.fingerprint(handle))
            if candidate < self.transcript_len and facts.fact("visible", candidate) == key
        ]
        if same:
            return self._count_against(
                handle, key, [candidate for candidate in same if self.replay_position(candidate) >= cursor]
            )
        if not key[1] or not self.fuzzy_allowed():
            return False
        return self._fuzzy_duplicate(handle, key)

    def _fuzzy_duplicate(self, handle: int, key: tuple[Any, ...]) -> bool:
        """Fuzzy likeness against the transcript's keys, in transcript order; the first one with room wins.

        Keys are taken in the order of their first row: texts one inside the other first, then, among
        keys before the one found that way, token strings one inside the other.
        """
        facts, replay_order = self.facts, self.replay_order
        limit = len(replay_order)
        role, api = key[0], api_content(facts.rows[handle])
        by_text, by_tokens = self._transcript_texts().fuzzy_hits(key[1])

        def first_with_room(positions: list[int], bound: int) -> tuple[int, tuple[Any, ...]] | None:
            checked: set[Any] = set()
            for i in positions:
                if i >= bound:
                    break
                candidate = replay_order[i]
                if facts.role(candidate) != role or api_content(facts.rows[candidate]) != api:
                    continue
                other = facts.fact("visible", candidate)
                if other in checked:
                    continue
                checked.add(other)
                if self._has_room(candidate, other):
                    return i, other
            return None

        found = first_with_room(by_text, limit)
        found = first_with_room(by_tokens, found[0] if found else limit) or found
        if found is None:
            return False
        i, other = found
        cursor = self.cursor
        return self._count_against(
            handle,
            other,
            [
                candidate
                for candidate in self._members(replay_order[i], other)
                if self.replay_position(candidate) >= cursor
            ],
        )

    def _copies_a_matched_row(self, handle: int) -> bool:
        """The row has the exact key of a state row already matched against the transcript."""
        facts = self.facts
        key = facts.fact("dedup", handle)
        return any(
            facts.fact("dedup", candidate) == key
            for candidate in self._matched.get(facts.fact("raw", handle), with_local=False)
        )

    def _matched_timestamps(self) -> set[float | None]:
        """Timestamps of the state rows matched so far (an exact copy of one has the same)."""
        fresh = self.matched_state[self._matched_ts_upto :]
        if fresh:
            self._matched_ts_upto += len(fresh)
            values = list(map(dict.get, map(self.facts.rows.__getitem__, fresh), repeat("timestamp")))
            if set(map(type, values)) <= {float}:
                self._matched_ts.update(values)
            else:
                self._matched_ts.update(map(parse_timestamp, values))
        return self._matched_ts

    def _transcript_texts(self) -> TranscriptTexts:
        if self._texts is None:
            self._texts = transcript_texts(
                self.facts.local_contents(self.replay_order), tokens, FUZZY_MAX_CHARS, self.facts.local_norms
            )
        return self._texts

    def _members(self, candidate: int, key: tuple[Any, ...]) -> list[int]:
        """Transcript rows whose visible key is ``key`` (the candidate's), in transcript order."""
        facts = self.facts
        return [
            member
            for member in self._by_fingerprint.get(facts.fingerprint(candidate))
            if member < self.transcript_len and facts.fact("visible", member) == key
        ]

    def _has_room(self, candidate: int, key: tuple[Any, ...]) -> bool:
        cursor = self.cursor
        unreplayed = sum(
            1 for member in self._members(candidate, key) if self.replay_position(member) >= cursor
        )
        return self._absorbed_as_duplicate.get(key, 0) < unreplayed

    def _count_against(self, handle: int, key: tuple[Any, ...], unreplayed: list[int]) -> bool:
        """Absorb the row against ``key`` while fewer rows were absorbed for it than unreplayed rows carry it."""
        used = self._absorbed_as_duplicate.get(key, 0)
        if used >= len(unreplayed):
            return False
        self._absorbed_as_duplicate[key] = used + 1
        self._absorb(handle, unreplayed[0])
        return True

    # -- outcomes ---------------------------------------------------------------------------------

    def _absorb(self, handle: int, target: int | None) -> None:
        """Drop a state row; display-only keys it has and its kept duplicate lacks are copied over."""
        row = self.facts.rows[handle]
        if target is None or not isinstance(row, dict) or DISPLAY_ONLY_KEYS.isdisjoint(row):
            return
        kept = self.facts.rows[target]
        if isinstance(kept, dict):
            extra = {k: row[k] for k in DISPLAY_ONLY_KEYS if k in row and k not in kept}
            if extra:
                self.facts.rows[target] = {**kept, **extra}

    def _append(self, handle: int) -> None:
        if self.out is None:
            self.appended.append(handle)
        else:
            self.out.append(handle)
        self.registered_state.append(handle)

    def _is_call(self, handle: int) -> bool:
        row = self.facts.rows[handle]
        return isinstance(row, dict) and row.get("role") == "assistant" and bool(row.get("tool_calls"))

    def _insert_chronologically(self, handle: int) -> None:
        facts = self.facts
        ts, role = facts.ts(handle), facts.role(handle)
        if ts is None:
            self._append(handle)
            return
        if self.out is None:
            self.out = list(range(self.transcript_len)) + self.appended
        out = self.out
        empty_call = self._is_call(handle) and not facts.fact("norm", handle)
        idx = None
        for i, member in enumerate(out):
            other = facts.ts(member)
            if other is None:
                continue
            if other > ts or (
                other == ts
                and facts.role(member) == "assistant"
                and (role == "user" or (empty_call and facts.fact("norm", member)))
            ):
                idx = i
                break
        if idx is None:
            self._append(handle)
            return
        if idx == 0:
            return  # nothing older survives in the transcript: never resurrect compacted-out rows
        moved = True
        while moved and idx < len(out):
            prev, cur = out[idx - 1], out[idx]
            moved = (facts.role(cur) == "tool" and (self._is_call(prev) or facts.role(prev) == "tool")) or (
                facts.role(prev) == role and facts.ts(cur) is not None and facts.ts(cur) == facts.ts(prev)
            )
            idx += moved
        out.insert(idx, handle)
        self.registered_state.append(handle)

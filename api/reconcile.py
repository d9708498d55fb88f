"""Reconciliation of a session file with the agent's ``state.db`` (session-core.md §3.3–§3.5).

The append-only merge decides which agent rows join a transcript; it never removes or reorders a
transcript row and never brings back what a compression, undo, retry, edit or clear removed. The only
I/O is ``reconciled_state_db_messages_for_session`` reading state.db through
``api.models.get_state_db_session_messages`` (looked up at call time) when no rows are passed in.
Neighbours: ``api.context_view`` (the §3.4 delta, the anchor lookup; its public name is re-exported
here) and ``api.merge_index`` (the merge's indexes and column-wise prefix).

Speed (the merge runs on every chat turn): the replay of an identical prefix compares raw fields and
touches no key; a rule that needs a key computes it once, for that row only (``message_keys.Rows``);
lookups go through indexes built on first use, and a lookup that provably cannot hit a transcript row
(a state row newer than every transcript row, a fully replayed transcript) builds none. Fuzzy matching
is bounded as §3.2 says (≤ 1000 distinct transcript keys, texts ≤ 200 000 chars).

Deliberate differences. First, rule d applies to every row whose *dedup* key is unseen, where the reference
skips it for rows whose whole-second merge key is seen. Rows with a seen dedup key are absorbed by
rule e either way, so this only changes one case: a same-second copy of a kept row, newer than the
transcript, after an undo/edit/compress. The reference appends it (the removed row springs back and
merging again is not idempotent); here the watermark keeps it out.

Second: a row older than the watermark that passes rule d (its content key is seen) may still be
absorbed by a later rule, but is never inserted or appended. Content keys ignore tool calls, so in the
reference every tool-call row (content "") passes d whenever the transcript has one, and an edit or
undo brings the removed turn's tool-call rows back by chronological insert.

Third, so that merging the output again adds nothing: rule i inserts an older tool-call row whose
content key is seen only when a row *not newer than it* has that key. The reference lets any row
count, so an empty assistant row appended by one merge makes the next merge insert a tool-call row the
first one had absorbed.

Reading notes where §3.3 leaves room: rule h absorbs when *some* transcript key the row matches still
has an unabsorbed transcript row (the first such key in transcript order takes the count); the prefix
replay's fuzzy match uses the same 1000-key bound; rule 6a (native-image mirror) compares user rows
with the exact same timestamp by their text with images and ``[screenshot]`` placeholders removed.
"""

from __future__ import annotations

from itertools import compress, repeat
from operator import gt
from typing import Any

from api.context_view import _state_db_anchor_index, state_db_delta_after_context
from api.merge_index import TranscriptTexts, _FingerprintIndex, _Index, _raw_prefix, transcript_texts
from api.message_keys import (
    DISPLAY_ONLY_KEYS,
    ROW_ID_ALIASES,
    Rows,
    api_content,
    collapse,
    context_messages_include_compression_marker,
    is_context_compression_marker,
    message_content_key,
    message_dedup_key,
    message_merge_key,
    message_visible_key,
    reconcile_api_content_sidecars,
    stable_id,
    strip_workspace_tag,
    tokens,
)
from api.messages import content_as_text, merge_timestamp, parse_timestamp

__all__ = [  # the §3.2 keys live in api.message_keys and are re-exported here
    "message_merge_key",
    "message_dedup_key",
    "message_content_key",
    "message_visible_key",
    "is_context_compression_marker",
    "_context_messages_include_compression_marker",
    "merge_session_messages_append_only",
    "state_db_delta_after_context",
    "reconciled_state_db_messages_for_session",
]

FUZZY_MAX_KEYS = 1000
FUZZY_MAX_CHARS = 200_000
_VISIBLE_COLUMNS = frozenset({"tool_calls", "api_content"})
_IMAGE_PART_TYPES = frozenset({"image_url", "input_image", "image"})
_SCREENSHOT = "[screenshot]"
_IDENTITY_KEYS = frozenset({"id", "message_id", *ROW_ID_ALIASES})
_context_messages_include_compression_marker = context_messages_include_compression_marker


def _ends_in_interrupted_turn(sidecar: list) -> bool:
    """Last user/assistant row is an assistant ``_error`` with an assistant ``_partial`` since the last user."""
    idx = len(sidecar) - 1
    while idx >= 0 and not (
        isinstance(sidecar[idx], dict) and sidecar[idx].get("role") in ("user", "assistant")
    ):
        idx -= 1
    if idx < 0 or sidecar[idx].get("role") != "assistant" or not sidecar[idx].get("_error"):
        return False
    for row in reversed(sidecar[:idx]):
        if isinstance(row, dict) and row.get("role") == "user":
            return False
        if isinstance(row, dict) and row.get("role") == "assistant" and row.get("_partial"):
            return True
    return False


def _cold_reconstruction(state: list, watermark: float | None, boundary: float | None) -> list:
    if watermark is None:
        candidates = state
    elif watermark == 0:
        return []  # truncate-to-empty sentinel: nothing replays
    else:
        stamped = [(m, merge_timestamp(m)) for m in state]
        if boundary is not None and boundary < watermark:
            candidates = [m for m, t in stamped if t is not None and t <= boundary]
            candidates += [m for m, t in stamped if t is not None and t >= watermark]
        else:
            candidates = [m for m, t in stamped if t is not None and t <= watermark]
    seen: set = set()
    out = []
    for m in candidates:
        key = message_dedup_key(m)
        if key not in seen:
            seen.add(key)
            out.append(m)
    return out


def _screenshot_projection(content: Any) -> tuple[str, int]:
    """(text without images or ``[screenshot]`` placeholders, number of images) of a user row."""
    images = 0
    if isinstance(content, list):
        texts = []
        for part in content:
            if isinstance(part, dict) and part.get("type") in _IMAGE_PART_TYPES:
                images += 1
            elif isinstance(part, dict) and isinstance(part.get("text"), str):
                texts.append(part["text"])
        text = " ".join(texts)
    else:
        text = content_as_text(content)
    images += text.count(_SCREENSHOT)
    return collapse(text.replace(_SCREENSHOT, " ")), images


class _Merge:
    def __init__(self, sidecar: list, state: list, watermark: float | None, boundary: float | None):
        self.t = Rows(sidecar, state)
        self.n = len(sidecar)
        self.W, self.B = watermark, boundary
        if set(map(type, sidecar)) == {dict}:  # the visible sequence: the dict rows of the transcript
            self.seq: range | list[int] = range(self.n)
        else:
            self.seq = [h for h in range(self.n) if isinstance(sidecar[h], dict)]
        self.p = 0  # prefix replay cursor into seq
        self.appended: list[int] = []
        self.out: list[int] | None = None  # output handles, materialised on the first insertion
        self.registered_state: list[int] = []
        self.matched_state: list[int] = []  # state rows absorbed by rules a and b
        self._S: Any = ...
        self._raw = _Index(self, "raw")
        self._fp = _FingerprintIndex(self)
        self._mid = _Index(self, "mid")
        self._rid = _Index(self, "rowid")
        self._matched = _Index(self, "raw", self.matched_state)
        self._matched_ts: set[float | None] = set()
        self._matched_ts_upto = 0
        self._fuzzy_ok: bool | None = None
        self._texts: TranscriptTexts | None = None
        self._call_ids: set[str] | None = None
        self._positions: dict[int, int] | None = None
        self._h_absorbed: dict = {}
        self._by_ts: dict | None = None
        self._mirrored: set[int] = set()

    # -- facts about the whole transcript ---------------------------------------------------------

    @property
    def S(self) -> float | None:
        """Newest parseable transcript timestamp."""
        if self._S is ...:
            self._S = self.t.local_max_timestamp()
        return self._S

    def stable_key(self, h: int) -> str | None:
        row = self.t.rows[h]
        sid = stable_id(row) if isinstance(row, dict) else None
        return str(sid) if sid else None

    def pos(self, h: int) -> int:
        if len(self.seq) == self.n:
            return h
        if self._positions is None:
            self._positions = {c: i for i, c in enumerate(self.seq)}
        return self._positions[h]

    def fuzzy_allowed(self) -> bool:
        """§3.2: fuzzy matching only while the transcript has at most 1000 distinct visible keys."""
        if self._fuzzy_ok is None:
            if len(self.seq) <= FUZZY_MAX_KEYS:
                self._fuzzy_ok = True
            else:
                buckets = set(self._fp.local_list())
                buckets.discard(None)
                if len(buckets) > FUZZY_MAX_KEYS:  # distinct fingerprints never exceed distinct keys
                    self._fuzzy_ok = False
                else:
                    self._fuzzy_ok = len({self.t.fact("visible", h) for h in self.seq}) <= FUZZY_MAX_KEYS
        return self._fuzzy_ok

    # -- lookups among registered rows (transcript + state rows added so far) ----------------------

    def _local_impossible(self, h: int, kind: str) -> bool:
        """A legacy merge/dedup key of a row newer than every transcript row cannot match a transcript row."""
        ts = self.t.ts(h)
        if ts is None:
            return False
        S = self.S
        if kind == "dedup":
            return S is None or ts > S
        return ts >= 1 and (S is None or int(ts) > S)

    def find(self, kind: str, h: int, not_after: float | None = None) -> int | None:
        """A registered row whose ``kind`` key equals row h's (optionally one not newer than ``not_after``)."""
        t = self.t
        key = t.fact(kind, h)
        if key[0] == "message_id":
            candidates = self._mid.get(key[1])
        elif kind in ("merge", "dedup"):
            candidates = self._raw.get(t.fact("raw", h), with_local=not self._local_impossible(h, kind))
        else:
            candidates = self._fp.get(t.fp(h))
        for c in candidates:
            if t.fact(kind, c) == key and (not_after is None or t.ts(c) is None or t.ts(c) <= not_after):
                return c
        return None

    def _visible_duplicate(self, h: int) -> bool:
        """Rule h: a transcript row with the same (or fuzzily the same) visible key is still unabsorbed."""
        t, p = self.t, self.p
        if p >= len(self.seq) or not isinstance(t.rows[h], dict):
            return False  # every transcript row was already counted by the replay
        key = t.fact("visible", h)
        same = [c for c in self._fp.get(t.fp(h)) if c < self.n and t.fact("visible", c) == key]
        if same:
            return self._count_against(h, key, [c for c in same if self.pos(c) >= p])
        if not key[1] or not self.fuzzy_allowed():
            return False
        return self._fuzzy_duplicate(h, key)

    def _fuzzy_duplicate(self, h: int, key: tuple) -> bool:
        """§3.2 fuzzy match against the transcript's keys, in transcript order, first one with room wins.

        Keys are taken in the order of their first row: texts one inside the other first, then, among
        keys before the one found that way, token strings one inside the other.
        """
        t, seq = self.t, self.seq
        limit = len(seq)
        role, api = key[0], api_content(t.rows[h])
        by_text, by_tokens = self._transcript_texts().fuzzy_hits(key[1])

        def first_with_room(positions: list[int], bound: int) -> tuple[int, tuple] | None:
            checked: set = set()
            for i in positions:
                if i >= bound:
                    break
                c = seq[i]
                if t.role(c) != role or api_content(t.rows[c]) != api:
                    continue
                other = t.fact("visible", c)
                if other in checked:
                    continue
                checked.add(other)
                if self._has_room(c, other):
                    return i, other
            return None

        found = first_with_room(by_text, limit)
        found = first_with_room(by_tokens, found[0] if found else limit) or found
        if found is None:
            return False
        i, other = found
        p = self.p
        return self._count_against(h, other, [c for c in self._members(seq[i], other) if self.pos(c) >= p])

    def _unlike_transcript(self, h: int) -> bool:
        """No unreplayed transcript row has row h's visible key or is fuzzily like it: rules b and h
        cannot fire. Decided from the transcript's text index, without building h's keys."""
        if self.p >= len(self.seq):
            return True  # nothing left to replay, and rule h counts only unreplayed rows
        t, seq = self.t, self.seq
        norm = t.fact("norm", h)
        texts = self._transcript_texts()
        if norm in texts.norm_set:
            calls = t.rows[h].get("tool_calls")
            if not calls:
                return False
            # Equal tool calls have the same first call id; a row whose first id is new is unlike.
            first = calls[0] if isinstance(calls, (list, tuple)) else None
            call_id = first.get("id") if isinstance(first, dict) else None
            if not isinstance(call_id, str) or call_id in self._transcript_call_ids():
                return False
        if not norm or not self.fuzzy_allowed():
            return True
        role, api = t.role(h), api_content(t.rows[h])
        limit = len(seq)
        for positions in texts.fuzzy_hits(norm):
            for i in positions:
                if i >= limit:
                    break
                if t.role(seq[i]) == role and api_content(t.rows[seq[i]]) == api:
                    return False
        return True

    def _copies_a_matched_row(self, h: int) -> bool:
        """Row h has the dedup key of a state row already matched against the transcript."""
        t = self.t
        key = t.fact("dedup", h)
        return any(t.fact("dedup", c) == key for c in self._matched.get(t.fact("raw", h), with_local=False))

    def _matched_timestamps(self) -> set[float | None]:
        """Timestamps of the state rows matched so far (an exact copy of one has the same)."""
        fresh = self.matched_state[self._matched_ts_upto :]
        if fresh:
            self._matched_ts_upto += len(fresh)
            values = list(map(dict.get, map(self.t.rows.__getitem__, fresh), repeat("timestamp")))
            if set(map(type, values)) <= {float}:
                self._matched_ts.update(values)
            else:
                self._matched_ts.update(map(parse_timestamp, values))
        return self._matched_ts

    def _plainly_new(self, h: int) -> bool:
        """Rules c–g and i cannot fire for row h: no watermark, no identity fields, newer than every
        transcript row (so no transcript row shares its dedup or merge key) and no registered state row
        with its text (rule e). With ``_unlike_transcript`` it is appended (rule j) without its keys;
        that is the path of the rows a new turn adds."""
        t = self.t
        if self.W is not None or not t.rows[h].keys().isdisjoint(_IDENTITY_KEYS):
            return False
        ts, newest = t.ts(h), self.S
        if ts is None or (newest is not None and ts <= newest):
            return False
        if self.matched_state and ts in self._matched_timestamps():
            return False
        return not self._raw.get(t.fact("raw", h), with_local=False)

    def _transcript_call_ids(self) -> set[str]:
        """The ``id`` of the first tool call of every transcript row that has tool calls."""
        if self._call_ids is None:
            local = self.t.rows[: self.n]
            try:
                callers = list(compress(local, map(dict.get, local, repeat("tool_calls"))))
            except TypeError:  # a non-dict row: the same test row by row
                callers = [m for m in local if isinstance(m, dict) and m.get("tool_calls")]
            self._call_ids = set()
            for row in callers:
                calls = row["tool_calls"]
                first = calls[0] if isinstance(calls, (list, tuple)) else None
                call_id = first.get("id") if isinstance(first, dict) else None
                if isinstance(call_id, str):
                    self._call_ids.add(call_id)
        return self._call_ids

    def _transcript_texts(self) -> TranscriptTexts:
        if self._texts is None:
            self._texts = transcript_texts(self.t.local_norms(self.seq), tokens, FUZZY_MAX_CHARS)
        return self._texts

    def _members(self, c: int, key: tuple) -> list[int]:
        """Transcript rows whose visible key is ``key`` (row c's), in transcript order."""
        t = self.t
        return [o for o in self._fp.get(t.fp(c)) if o < self.n and t.fact("visible", o) == key]

    def _has_room(self, c: int, key: tuple) -> bool:
        p = self.p
        unreplayed = sum(1 for o in self._members(c, key) if self.pos(o) >= p)
        return self._h_absorbed.get(key, 0) < unreplayed

    def _count_against(self, h: int, key: tuple, unreplayed: list[int]) -> bool:
        """Absorb h against ``key`` while fewer rows were absorbed for it than unreplayed rows carry it."""
        used = self._h_absorbed.get(key, 0)
        if used >= len(unreplayed):
            return False
        self._h_absorbed[key] = used + 1
        self._absorb(h, unreplayed[0])
        return True

    # -- outcomes ---------------------------------------------------------------------------------

    def _absorb(self, h: int, target: int | None) -> None:
        """Drop state row h; display-only keys it has and its kept duplicate lacks are copied over."""
        row = self.t.rows[h]
        if target is None or not isinstance(row, dict) or DISPLAY_ONLY_KEYS.isdisjoint(row):
            return
        kept = self.t.rows[target]
        if isinstance(kept, dict):
            extra = {k: row[k] for k in DISPLAY_ONLY_KEYS if k in row and k not in kept}
            if extra:
                self.t.rows[target] = {**kept, **extra}

    def _append(self, h: int) -> None:
        if self.out is None:
            self.appended.append(h)
        else:
            self.out.append(h)
        self.registered_state.append(h)

    def _is_call(self, h: int) -> bool:
        row = self.t.rows[h]
        return isinstance(row, dict) and row.get("role") == "assistant" and bool(row.get("tool_calls"))

    def _insert_chronologically(self, h: int) -> None:
        t = self.t
        ts, role = t.ts(h), t.role(h)
        if ts is None:
            self._append(h)
            return
        if self.out is None:
            self.out = list(range(self.n)) + self.appended
        out = self.out
        empty_call = self._is_call(h) and not t.fact("norm", h)
        idx = None
        for i, o in enumerate(out):
            other = t.ts(o)
            if other is None:
                continue
            if other > ts or (
                other == ts
                and t.role(o) == "assistant"
                and (role == "user" or (empty_call and t.fact("norm", o)))
            ):
                idx = i
                break
        if idx is None:
            self._append(h)
            return
        if idx == 0:
            return  # nothing older survives in the transcript: never resurrect compacted-out rows
        moved = True
        while moved and idx < len(out):
            prev, cur = out[idx - 1], out[idx]
            moved = (t.role(cur) == "tool" and (self._is_call(prev) or t.role(prev) == "tool")) or (
                t.role(prev) == role and t.ts(cur) is not None and t.ts(cur) == t.ts(prev)
            )
            idx += moved
        out.insert(idx, h)
        self.registered_state.append(h)

    # -- the rules --------------------------------------------------------------------------------

    def _native_image_mirror(self, h: int) -> bool:
        """Rule a: the state copy of a transcript user row whose image the transcript shows as a placeholder."""
        t = self.t
        row, ts = t.rows[h], t.ts(h)
        text, images = _screenshot_projection(row["content"])
        if not images or ts is None:
            return False
        if self._by_ts is None:
            self._by_ts = {}
            for c in range(self.n):
                if t.role(c) == "user" and t.ts(c) is not None:
                    self._by_ts.setdefault(t.ts(c), []).append(c)
        matches = []
        for c in self._by_ts.get(ts, ()):
            side = t.rows[c]
            if c in self._mirrored or _screenshot_projection(side.get("content"))[0] != text:
                continue
            if self.stable_key(h) and self.stable_key(c) and self.stable_key(h) != self.stable_key(c):
                continue
            rid_a, rid_b = t.fact("rowid", h), t.fact("rowid", c)
            if rid_a is not None and rid_b is not None and rid_a != rid_b:
                continue
            matches.append(c)
        if len(matches) != 1:
            return False
        self._mirrored.add(matches[0])
        self.matched_state.append(h)
        return True

    def _row_id_duplicate(self, h: int) -> int | None:
        """Rule c: the one registered row with the same valid row id, compatible identity and api_content."""
        t = self.t
        rid = t.fact("rowid", h)
        if rid is None:
            return None
        same = self._rid.get(rid)
        if len(same) != 1:
            return None
        c = same[0]
        if self.stable_key(h) and self.stable_key(c) and self.stable_key(h) != self.stable_key(c):
            return None
        if t.ts(h) is None or t.ts(c) is None or self._api_conflict(h, c):
            return None
        return c

    def _api_conflict(self, h: int, c: int) -> bool:
        a, b = self.t.rows[h], self.t.rows[c]
        x = api_content(a) if isinstance(a, dict) else None
        y = api_content(b) if isinstance(b, dict) else None
        return bool(x and y and x != y)

    def _place(self, h: int) -> None:
        """Rules c–j for a state row the prefix replay did not absorb."""
        t, W = self.t, self.W
        ts = t.ts(h)
        target = self._row_id_duplicate(h)  # c
        if target is not None:
            self._absorb(h, target)
            return
        dedup_seen = self.find("dedup", h)
        if dedup_seen is None and self._copies_a_matched_row(h):
            return  # an exact copy of a state row the transcript already matched
        if W is not None and ts is not None and dedup_seen is None:  # d: the watermark filters
            consumed = self.p >= len(self.seq)
            S, B = self.S, self.B
            advanced = (S is not None and S > W) or (B is not None and B < W and consumed)
            if ts > W:
                if not advanced or (S is not None and ts <= S):
                    return
            elif (ts < W or t.role(h) == "user") and self.find("content", h) is None:
                return
        if dedup_seen is not None:  # e
            self._absorb(h, dedup_seen)
            return
        below = W is not None and ts is not None and ts < W  # may still be absorbed, never added
        S = self.S
        older = S is not None and ts is not None and ts <= S
        kind = t.fact("merge", h)[0]
        if older or kind == "message_id":  # f, g
            merge_seen = self.find("merge", h)
            if merge_seen is not None:
                self._absorb(h, merge_seen)
                return
        if self._visible_duplicate(h):  # h
            return
        rid = t.fact("rowid", h)
        conflict = rid is not None and any(self._api_conflict(h, c) for c in self._rid.get(rid))
        if kind == "legacy" and older and not conflict:
            content_seen = self.find("content", h)  # i
            consumed = self.p >= len(self.seq)
            if W is not None and ts == W and consumed and t.role(h) != "user" and content_seen is None:
                pass  # same-second agent row after a fully replayed transcript: append (j)
            elif t.rows[h].get("tool_calls"):
                # Only rows not newer than r count, so a row this merge appends cannot flip the decision
                # on the next merge (the reference counts every row and is then not idempotent).
                if not below and self.find("content", h, not_after=ts) is not None:
                    self._insert_chronologically(h)
                return
            elif t.role(h) == "user" and content_seen is None:
                if not below:
                    self._insert_chronologically(h)
                return
            else:
                self._absorb(h, content_seen)
                return
        if not below:
            self._append(h)  # j

    def _replayed_block(self) -> int:
        """How many leading state rows replay the transcript row for row (rule b), decided column-wise."""
        t, n = self.t, self.n
        length = min(n, len(t.rows) - n)
        if len(self.seq) != n or not length:
            return 0
        state = t.rows[n : n + length]
        found = _raw_prefix(state, t.rows[:length], _VISIBLE_COLUMNS)
        if found is None:
            return 0
        length, closer, contents = found
        for i in sorted(closer):
            if type(contents[i]) is not str or not t.same_visible(n + i, i):
                length = i
                break
        for i in compress(range(length), map(gt, map(len, state[:length]), repeat(3))):
            self._absorb(n + i, i)  # copies display-only keys, if the row has any
        self.matched_state.extend(range(n, n + length))
        return length

    def run(self) -> list:
        t = self.t
        rows, seq, n = t.rows, self.seq, self.n
        self.p = self._replayed_block()
        for h in range(n + self.p, len(rows)):
            r = rows[h]
            if type(r) is dict:
                content = r.get("content")
                if type(content) is list and r.get("role") == "user" and self._native_image_mirror(h):
                    continue  # a
                p = self.p
                unlike = self._unlike_transcript(h)
                if not unlike:  # b: prefix replay
                    q = seq[p]
                    s = rows[q]
                    role = r.get("role")
                    if (
                        type(content) is str
                        and content == s.get("content")
                        and role == s.get("role")
                        and not r.get("tool_calls")
                        and not s.get("tool_calls")
                        and not r.get("api_content")
                        and not s.get("api_content")
                        and (role != "user" or strip_workspace_tag(content) is content)
                    ) or (
                        t.same_visible(h, q)
                        or (self.fuzzy_allowed() and t.fuzzy_visible(h, q, FUZZY_MAX_CHARS))
                    ):
                        if len(r) > 3:
                            self._absorb(h, q)
                        self.matched_state.append(h)
                        self.p = p + 1
                        continue
                if unlike and self._plainly_new(h):
                    self._append(h)  # j
                    continue
            self._place(h)
        if self.out is not None:
            return [rows[h] for h in self.out]
        return rows[:n] + [rows[h] for h in self.appended]


def merge_session_messages_append_only(
    sidecar: list | None,
    state: list | None,
    *,
    truncation_watermark: Any = None,
    truncation_boundary: Any = None,
) -> list:
    """The transcript rows in order plus the state rows it lacks, honouring the watermark (§3.3).

    Never removes or reorders a transcript row. Watermark 0.0 on an empty transcript is the
    truncate-to-empty sentinel; a state row older than the watermark and unknown to the transcript
    never appears.
    """
    sidecar = list(sidecar or [])
    state = list(state or [])
    reconcile_api_content_sidecars(sidecar, state)
    if not state:
        return sidecar
    watermark = parse_timestamp(truncation_watermark)
    boundary = parse_timestamp(truncation_boundary)
    if not sidecar:
        return _cold_reconstruction(state, watermark, boundary)
    if _ends_in_interrupted_turn(sidecar):
        return sidecar
    return _Merge(sidecar, state, watermark, boundary).run()


def reconciled_state_db_messages_for_session(
    session: Any, *, prefer_context: bool = False, state_messages: list | None = None
) -> list:
    """The transcript (or, with ``prefer_context``, the model-facing context) merged with state.db (§3.5).

    Reads state.db through ``api.models.get_state_db_session_messages(sid)`` when ``state_messages``
    is None. A context holding a compaction marker comes back as-is unless its anchor is in state.db.
    """
    if session is None:
        return []
    messages = getattr(session, "messages", None)
    messages = messages if isinstance(messages, list) else []
    context = getattr(session, "context_messages", None)
    from_context = bool(prefer_context and isinstance(context, list) and context)
    local = context if from_context else messages
    if state_messages is None:
        import api.models  # at call time: the lead binds it, tests monkeypatch it

        state_messages = api.models.get_state_db_session_messages(getattr(session, "session_id", None))
    state = list(state_messages or [])
    if from_context:
        claimed_cli = bool(getattr(session, "is_cli_session", False)) and not getattr(
            session, "read_only", False
        )
        if (
            claimed_cli
            and len(messages) > len(context)
            and all(
                message_merge_key(a) == message_merge_key(b) for a, b in zip(context, messages, strict=False)
            )
        ):
            local = messages
        elif context_messages_include_compression_marker(local):
            anchor = getattr(session, "compression_anchor_message_key", None)
            idx = _state_db_anchor_index(state, anchor) if anchor else None
            if idx is None:
                return list(local)
            state = state[idx + 1 :]
    if prefer_context and local:
        state = state_db_delta_after_context(local, state)
    return merge_session_messages_append_only(
        local,
        state,
        truncation_watermark=getattr(session, "truncation_watermark", None),
        truncation_boundary=getattr(session, "truncation_boundary", None),
    )

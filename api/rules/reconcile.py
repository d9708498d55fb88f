"""Reconciliation of a session file with the agent's ``state.db``: the append-only merge and the
reconciled view (docs/reconciliation.md).

The merge decides which agent rows join a transcript; it never removes or reorders a transcript row and
never brings back what a compression, undo, retry, edit or clear removed. This module holds its rules and
entry points; everything here is pure: the rows come in as arguments. Neighbours: ``api.rules.merge_state`` (a
merge in progress: its rows, lookups and outcomes), ``api.rules.context_view`` (the context delta and the anchor
lookup; its public name is re-exported here), ``api.rules.merge_index`` (the merge's indexes), ``api.rules.row_facts``
(per-row facts) and ``api.rules.message_keys`` (the keys). The rules, their names and where they differ from
hermes-webui's merge are in docs/reconciliation.md ("The rules", "Deliberate differences from
hermes-webui"); "Speed" there says how a merge avoids work per transcript row.
"""

from __future__ import annotations

from itertools import compress, repeat
from operator import gt
from typing import Any

from api.rules.context_view import state_db_anchor_index, state_db_delta_after_context
from api.rules.merge_index import raw_prefix
from api.rules.merge_state import FUZZY_MAX_CHARS, MergeState
from api.rules.message_keys import (
    api_content,
    collapse,
    context_messages_include_compression_marker,
    is_context_compression_marker,
    message_content_key,
    message_dedup_key,
    message_merge_key,
    message_visible_key,
    reconcile_api_content_sidecars,
    strip_workspace_tag,
)
from api.rules.messages import content_as_text, merge_timestamp, parse_timestamp
from api.rules.plain_tail import context_tail, count_plainly_new

__all__ = [  # the message keys live in api.rules.message_keys and are re-exported here
    "message_merge_key",
    "message_dedup_key",
    "message_content_key",
    "message_visible_key",
    "is_context_compression_marker",
    "_context_messages_include_compression_marker",
    "merge_session_messages_append_only",
    "state_db_delta_after_context",
    "reconciled_view",
]

_VISIBLE_COLUMNS = frozenset({"tool_calls", "api_content"})
_IMAGE_PART_TYPES = frozenset({"image_url", "input_image", "image"})
_SCREENSHOT = "[screenshot]"
_context_messages_include_compression_marker = context_messages_include_compression_marker


def _ends_in_interrupted_turn(sidecar: list[Any]) -> bool:
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


def _cold_reconstruction(state: list[Any], watermark: float | None, boundary: float | None) -> list[Any]:
    if watermark is None:
        candidates = state
    elif watermark == 0:
        return []  # truncate-to-empty sentinel: nothing replays
    else:
        stamped = [(m, merge_timestamp(m)) for m in state]
        if boundary is not None and boundary < watermark:
            candidates = [m for m, ts in stamped if ts is not None and ts <= boundary]
            candidates += [m for m, ts in stamped if ts is not None and ts >= watermark]
        else:
            candidates = [m for m, ts in stamped if ts is not None and ts <= watermark]
    seen: set[Any] = set()
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


class _Merge(MergeState):
    """One run of the append-only merge: the rules, in the order docs/reconciliation.md gives them."""

    def _append_plainly_new(self, start: int) -> int:
        """Append the rows from ``start`` on that no rule but the last can take, without building their keys;
        the path of the rows a new turn adds (``count_plainly_new``). Returns how many it appended."""
        if self.watermark is not None:
            return 0
        count = count_plainly_new(
            self.facts.rows,
            start,
            newest=self.newest,
            texts=self._transcript_texts() if self.cursor < len(self.replay_order) else None,
            transcript=self.facts.rows,
            replay_order=self.replay_order,
            fuzzy_allowed=self.fuzzy_allowed,
            # Only appends happen in the run, so the matched rows and their times stay as they are.
            matched_times=self._matched_timestamps() if self.matched_state else (),
            registered=lambda: self._by_text.synced(with_local=False),
            registered_first=bool(self.registered_state),
        )
        if count:
            taken = range(start, start + count)
            (self.appended if self.out is None else self.out).extend(taken)
            self.registered_state.extend(taken)
        return count

    # -- the rules --------------------------------------------------------------------------------

    def _native_image_mirror(self, handle: int) -> bool:
        """Screenshot mirror: the state copy of a transcript user row whose image the transcript shows as a
        placeholder."""
        facts = self.facts
        row, ts = facts.rows[handle], facts.ts(handle)
        text, images = _screenshot_projection(row["content"])
        if not images or ts is None:
            return False
        if self._by_ts is None:
            self._by_ts = {}
            for candidate in range(self.transcript_len):
                when = facts.ts(candidate)
                if facts.role(candidate) == "user" and when is not None:
                    self._by_ts.setdefault(when, []).append(candidate)
        matches = []
        for candidate in self._by_ts.get(ts, ()):
            side = facts.rows[candidate]
            if candidate in self._mirrored or _screenshot_projection(side.get("content"))[0] != text:
                continue
            if (
                self.stable_key(handle)
                and self.stable_key(candidate)
                and self.stable_key(handle) != self.stable_key(candidate)
            ):
                continue
            rid_a, rid_b = facts.fact("rowid", handle), facts.fact("rowid", candidate)
            if rid_a is not None and rid_b is not None and rid_a != rid_b:
                continue
            matches.append(candidate)
        if len(matches) != 1:
            return False
        self._mirrored.add(matches[0])
        self.matched_state.append(handle)
        return True

    def _row_id_duplicate(self, handle: int) -> int | None:
        """Same row id: the one registered row with the same valid row id, compatible identity and
        api_content."""
        facts = self.facts
        rid = facts.fact("rowid", handle)
        if rid is None:
            return None
        same = self._by_row_id.get(rid)
        if len(same) != 1:
            return None
        candidate = same[0]
        if (
            self.stable_key(handle)
            and self.stable_key(candidate)
            and self.stable_key(handle) != self.stable_key(candidate)
        ):
            return None
        if facts.ts(handle) is None or facts.ts(candidate) is None or self._api_conflict(handle, candidate):
            return None
        return candidate

    def _api_conflict(self, handle: int, candidate: int) -> bool:
        a, b = self.facts.rows[handle], self.facts.rows[candidate]
        x = api_content(a) if isinstance(a, dict) else None
        y = api_content(b) if isinstance(b, dict) else None
        return bool(x and y and x != y)

    def _place(self, handle: int) -> None:
        """The rules after the replay, in order, for a state row the replay did not absorb."""
        facts, watermark = self.facts, self.watermark
        ts = facts.ts(handle)
        target = self._row_id_duplicate(handle)  # same row id
        if target is not None:
            self._absorb(handle, target)
            return
        dedup_seen = self.find("dedup", handle)
        if dedup_seen is None and self._copies_a_matched_row(handle):
            return  # an exact copy of a state row the transcript already matched
        if watermark is not None and ts is not None and dedup_seen is None:  # watermark
            consumed = self.cursor >= len(self.replay_order)
            newest, boundary = self.newest, self.boundary
            advanced = (newest is not None and newest > watermark) or (
                boundary is not None and boundary < watermark and consumed
            )
            if ts > watermark:
                if not advanced or (newest is not None and ts <= newest):
                    return
            elif (ts < watermark or facts.role(handle) == "user") and self.find("content", handle) is None:
                return
        if dedup_seen is not None:  # exact copy
            self._absorb(handle, dedup_seen)
            return
        below = (
            watermark is not None and ts is not None and ts < watermark
        )  # may still be absorbed, never added
        newest = self.newest
        older = newest is not None and ts is not None and ts <= newest
        kind = facts.fact("merge", handle)[0]
        if older or kind == "message_id":  # same message
            merge_seen = self.find("merge", handle)
            if merge_seen is not None:
                self._absorb(handle, merge_seen)
                return
        if self._visible_duplicate(handle):  # visible duplicate
            return
        rid = facts.fact("rowid", handle)
        conflict = rid is not None and any(
            self._api_conflict(handle, candidate) for candidate in self._by_row_id.get(rid)
        )
        if kind == "legacy" and older and not conflict:
            content_seen = self.find("content", handle)  # late row
            consumed = self.cursor >= len(self.replay_order)
            if (
                watermark is not None
                and ts == watermark
                and consumed
                and facts.role(handle) != "user"
                and content_seen is None
            ):
                pass  # same-second agent row after a fully replayed transcript: append (j)
            elif facts.rows[handle].get("tool_calls"):
                # Only rows not newer than r count, so a row this merge appends cannot flip the decision
                # on the next merge (the reference counts every row and is then not idempotent).
                if not below and self.find("content", handle, not_after=ts) is not None:
                    self._insert_chronologically(handle)
                return
            elif facts.role(handle) == "user" and content_seen is None:
                if not below:
                    self._insert_chronologically(handle)
                return
            else:
                self._absorb(handle, content_seen)
                return
        if not below:
            self._append(handle)  # append

    def _replayed_block(self) -> int:
        """How many leading state rows replay the transcript row for row, decided column-wise."""
        facts, transcript_len = self.facts, self.transcript_len
        length = min(transcript_len, len(facts.rows) - transcript_len)
        if len(self.replay_order) != transcript_len or not length:
            return 0
        first, expected = facts.rows[transcript_len], facts.rows[0]
        if type(first) is not dict or first.get("content") != expected.get("content"):
            return 0  # no run to replay: the usual case once the context delta cut the mirrored rows
        state = facts.rows[transcript_len : transcript_len + length]
        found = raw_prefix(state, facts.rows[:length], _VISIBLE_COLUMNS)
        if found is None:
            return 0
        length, closer, contents = found
        for i in sorted(closer):
            if type(contents[i]) is not str or not facts.same_visible(transcript_len + i, i):
                length = i
                break
        for i in compress(range(length), map(gt, map(len, state[:length]), repeat(3))):
            self._absorb(transcript_len + i, i)  # copies display-only keys, if the row has any
        self.matched_state.extend(range(transcript_len, transcript_len + length))
        return length

    def _take(self, handle: int) -> int:
        """Apply the rules to the state row ``handle`` (and to the plainly new rows after it); returns how
        many rows were decided."""
        facts = self.facts
        rows, replay_order = facts.rows, self.replay_order
        row = rows[handle]
        if type(row) is dict:
            content = row.get("content")
            if type(content) is list and row.get("role") == "user" and self._native_image_mirror(handle):
                return 1  # screenshot mirror
            appended = self._append_plainly_new(handle)
            if appended:
                return appended  # append
            cursor = self.cursor
            if cursor < len(replay_order):  # replay
                expected = replay_order[cursor]
                expected_row = rows[expected]
                role = row.get("role")
                if (
                    type(content) is str
                    and content == expected_row.get("content")
                    and role == expected_row.get("role")
                    and not row.get("tool_calls")
                    and not expected_row.get("tool_calls")
                    and not row.get("api_content")
                    and not expected_row.get("api_content")
                    and (role != "user" or strip_workspace_tag(content) is content)
                ) or (
                    facts.same_visible(handle, expected)
                    or (self.fuzzy_allowed() and facts.fuzzy_visible(handle, expected, FUZZY_MAX_CHARS))
                ):
                    if len(row) > 3:
                        self._absorb(handle, expected)
                    self.matched_state.append(handle)
                    self.cursor = cursor + 1
                    return 1
        self._place(handle)
        return 1

    def run(self) -> list[Any]:
        rows, transcript_len = self.facts.rows, self.transcript_len
        self.cursor = self._replayed_block()
        handle = transcript_len + self.cursor
        while handle < len(rows):
            handle += self._take(handle)
        if self.out is not None:
            return [rows[handle] for handle in self.out]
        return rows[:transcript_len] + [rows[handle] for handle in self.appended]


def merge_session_messages_append_only(
    sidecar: list[Any] | None,
    state: list[Any] | None,
    *,
    truncation_watermark: Any = None,
    truncation_boundary: Any = None,
) -> list[Any]:
    """The transcript rows in order plus the state rows it lacks, honouring the watermark.

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


def reconciled_view(
    session: Any, state_messages: list[Any] | None, *, prefer_context: bool = False
) -> list[Any]:
    """The transcript (or, with ``prefer_context``, the model-facing context) merged with the session's
    state.db rows (docs/reconciliation.md, "The reconciled view").

    A context holding a compaction marker comes back as-is unless its anchor is among the state rows.
    ``api.store.models.reconciled_state_db_messages_for_session`` reads the rows and calls this.
    """
    if session is None:
        return []
    found = getattr(session, "messages", None)
    messages: list[Any] = found if isinstance(found, list) else []
    found = getattr(session, "context_messages", None)
    context: list[Any] = found if isinstance(found, list) else []
    from_context = bool(prefer_context and context)
    local = context if from_context else messages
    state = list(state_messages or [])
    watermark = getattr(session, "truncation_watermark", None)
    if from_context:
        claimed_cli = bool(getattr(session, "is_cli_session", False)) and not getattr(
            session, "read_only", False
        )
        if not claimed_cli and parse_timestamp(watermark) is None:
            tail = context_tail(local, state)  # the usual case: state.db holds the context and a new turn
            if tail is not None:
                return list(local) if _ends_in_interrupted_turn(local) else local + tail
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
            idx = state_db_anchor_index(state, anchor) if anchor else None
            if idx is None:
                return list(local)
            state = state[idx + 1 :]
    if prefer_context and local:
        state = state_db_delta_after_context(local, state)
    return merge_session_messages_append_only(
        local,
        state,
        truncation_watermark=watermark,
        truncation_boundary=getattr(session, "truncation_boundary", None),
    )

"""Reconciliation of a session file with the agent's ``state.db`` (session-core.md §2.5, §3.2–§3.5).

Pure functions: the merge decides which agent rows join a transcript without ever removing or
reordering a transcript row, and without bringing back what a compression, undo, retry, edit or clear
removed. The only I/O is ``reconciled_state_db_messages_for_session`` reading ``state.db`` through
``api.models.get_state_db_session_messages`` (looked up at call time) when no rows are passed in.

Speed: the merge runs on every chat turn, so a row's keys are computed at most once and only when a
rule needs them (``_Rows``), the replay of an identical prefix compares raw fields before any
whitespace collapsing, and key lookups go through a whitespace-invariant fingerprint index built only
when some state row gets past the prefix replay. Fuzzy matching is bounded as §3.2 says.
"""

from __future__ import annotations

import json
import math
import re
from datetime import UTC, datetime
from typing import Any

FUZZY_MAX_KEYS = 1000
FUZZY_MAX_CHARS = 200_000
DISPLAY_ONLY_KEYS = frozenset(
    {
        "_turnDuration",
        "_turnTps",
        "_turnUsage",
        "_firstTokenMs",
        "_usedModel",
        "_gatewayRouting",
        "_statusCard",
        "_anchor_stream_id",
        "_anchor_activity_scene",
        "_media_snapshots",
    }
)
ROW_ID_ALIASES = ("_row_id", "_state_db_row_id", "_db_row_id", "state_db_row_id")
_WORKSPACE_TAG = re.compile(r"\s*\[Workspace(?:::v1)?:[^\]\n]*\]\s*")
_FIRST_TOKEN = re.compile(r"\s*(\S{1,16})")
_WORD = re.compile(r"\w+")
_MARKER_TEXT_TYPES = frozenset({"text", "input_text", "output_text"})
_IMAGE_PART_TYPES = frozenset({"image_url", "input_image", "image"})
_SCREENSHOT = "[screenshot]"
_INVALID = object()
_MISSING = object()


# ----------------------------------------------------------------------------------------------
# Message facts and keys (§3.2)
# ----------------------------------------------------------------------------------------------


def parse_timestamp(value: Any) -> float | None:
    """A finite float, or ``None`` for missing, empty, non-numeric or non-finite values."""
    if type(value) is float:
        return value if math.isfinite(value) else None
    if value is None or value == "" or isinstance(value, bool):
        return None
    try:
        out = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return out if math.isfinite(out) else None


def message_timestamp(msg: Any) -> float | None:
    """``ts(m)`` of §3.2: the parsed ``timestamp`` (``_ts`` is not consulted)."""
    return parse_timestamp(msg.get("timestamp")) if isinstance(msg, dict) else None


def _content_text(content: Any) -> str:
    if type(content) is str:
        return content
    return "" if content is None else str(content)


def _collapse(text: str) -> str:
    return " ".join(text.split())


def strip_workspace_tag(text: str) -> str:
    """Drop a leading ``[Workspace::v1: …]`` / ``[Workspace: …]`` tag the agent stores on user rows."""
    head = text[:1]
    if head == "[" or head.isspace():
        match = _WORKSPACE_TAG.match(text)
        if match is not None:
            return text[match.end() :]
    return text


def _side_text(msg: dict, state_side: bool) -> str:
    text = _content_text(msg.get("content"))
    if state_side and msg.get("role") == "user":
        text = strip_workspace_tag(text)
    return text


def _api_content(msg: dict) -> str | None:
    value = msg.get("api_content")
    return value if isinstance(value, str) and value else None


def _tool_calls_json(msg: dict) -> str:
    calls = msg.get("tool_calls")
    if not calls:
        return ""
    try:
        return json.dumps(calls, sort_keys=True)
    except (TypeError, ValueError):
        return repr(calls)


def _ts_seconds(raw: Any) -> str:
    if raw is None or raw == "":
        return ""
    try:
        value = float(raw)
    except (TypeError, ValueError, OverflowError):
        return str(raw)
    if not math.isfinite(value):
        return f"<invalid:{raw}>"
    return str(int(value))


def _stable_id(msg: dict) -> Any:
    return msg.get("id") or msg.get("message_id")


def _with_api(key: tuple, api: str | None) -> tuple:
    return key + (api,) if api else key


def _merge_key(msg: Any, tcj: str, full_precision: bool) -> tuple:
    if not isinstance(msg, dict):
        return ("non_dict", repr(msg))
    sid = _stable_id(msg)
    if sid:
        return _with_api(("message_id", str(sid)), _api_content(msg))
    raw_ts = msg.get("timestamp")
    ts_slot = str(raw_ts or "") if full_precision else _ts_seconds(raw_ts)
    key = (
        "legacy",
        msg.get("role"),
        _content_text(msg.get("content")),
        ts_slot,
        msg.get("tool_call_id") or "",
        msg.get("tool_name") or msg.get("name") or "",
        tcj,
    )
    return _with_api(key, _api_content(msg))


def _content_key(msg: Any, norm: str) -> tuple:
    if not isinstance(msg, dict):
        return ("non_dict", repr(msg))
    key = (msg.get("role"), norm, msg.get("tool_call_id") or "", msg.get("tool_name") or msg.get("name") or "")
    return _with_api(key, _api_content(msg))


def _visible_key(msg: Any, norm: str, tcj: str) -> tuple:
    if not isinstance(msg, dict):
        return ("non_dict", repr(msg))
    return _with_api((msg.get("role"), norm, tcj), _api_content(msg))


def message_merge_key(msg: Any) -> tuple:
    """Identity for appending: stable id, else role/content/whole-second ts/tool fields (+api_content)."""
    return _merge_key(msg, _tool_calls_json(msg) if isinstance(msg, dict) else "", False)


def message_dedup_key(msg: Any) -> tuple:
    """Like the merge key but with the timestamp at full precision."""
    return _merge_key(msg, _tool_calls_json(msg) if isinstance(msg, dict) else "", True)


def message_content_key(msg: Any, *, state_side: bool = False) -> tuple:
    """Role, whitespace-collapsed content and tool ids; the state side drops a user row's workspace tag."""
    if not isinstance(msg, dict):
        return ("non_dict", repr(msg))
    return _content_key(msg, _collapse(_side_text(msg, state_side)))


def message_visible_key(msg: Any, *, state_side: bool = False) -> tuple:
    """Role, whitespace-collapsed content and tool calls: what a person sees of the row."""
    if not isinstance(msg, dict):
        return ("non_dict", repr(msg))
    return _visible_key(msg, _collapse(_side_text(msg, state_side)), _tool_calls_json(msg))


def _fingerprint(text: str) -> str:
    """First and last 16 chars of the first and last whitespace-separated tokens.

    Equal whitespace-collapsed texts have equal fingerprints, and it reads only the ends of the text,
    so it indexes rows for content/visible-key lookups without collapsing every row.
    """
    match = _FIRST_TOKEN.match(text)
    if match is None:
        return ""
    tail = text[-64:].rstrip()
    if len(tail) < 20 and len(text) > 64:
        tail = text.rstrip()
    return match.group(1) + "\x00" + tail.rsplit(None, 1)[-1][-16:]


def _tokens(text: str) -> str:
    return " ".join(_WORD.findall(text.casefold()))


def row_id(msg: Any) -> Any:
    """The state.db row id carried under any alias: an int, ``None`` (none), or invalid on conflict."""
    if not isinstance(msg, dict):
        return None
    found = None
    for alias in ROW_ID_ALIASES:
        value = msg.get(alias)
        if value is None:
            continue
        if isinstance(value, bool):
            return _INVALID
        if isinstance(value, int):
            parsed = value
        elif isinstance(value, float) and value.is_integer():
            parsed = int(value)
        elif isinstance(value, str) and value.strip().isdigit():
            parsed = int(value.strip())
        else:
            return _INVALID
        if parsed < 0 or (found is not None and found != parsed):
            return _INVALID
        found = parsed
    return found


def _valid_row_id(msg: Any) -> int | None:
    rid = row_id(msg)
    return None if rid is _INVALID else rid


# ----------------------------------------------------------------------------------------------
# Compaction markers (§2.5)
# ----------------------------------------------------------------------------------------------


def _marker_text(msg: dict) -> str:
    content = msg.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [
            p.get("text")
            for p in content
            if isinstance(p, dict) and p.get("type") in _MARKER_TEXT_TYPES and isinstance(p.get("text"), str)
        ]
        return "\n".join(parts)
    return ""


def is_context_compression_marker(msg: Any) -> bool:
    """The agent's compaction summary row (or one of its preserved-context notes)."""
    if not isinstance(msg, dict):
        return False
    role = msg.get("role")
    if not role or role == "tool":
        return False
    text = _marker_text(msg).lower().lstrip()
    if text.startswith("[context compaction"):
        return True
    if msg.get("_compressed_summary") and text.startswith("context compaction"):
        return True
    return text.startswith("[your active task list was preserved across context compression]") or text.startswith(
        "[session arc summary"
    )


def _context_messages_include_compression_marker(messages: Any) -> bool:
    """Narrow test: a detector hit whose own text starts with the compaction wording."""
    if not isinstance(messages, list):
        return False
    for msg in messages:
        if not is_context_compression_marker(msg):
            continue
        content = msg.get("content")
        if isinstance(content, list):
            text = "".join(p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
        else:
            text = content if isinstance(content, str) else ""
        text = text.lower().lstrip()
        if text.startswith("[context compaction") or text.startswith("context compaction"):
            return True
    return False


# ----------------------------------------------------------------------------------------------
# api_content reconciliation (§3.2, last bullet)
# ----------------------------------------------------------------------------------------------


def _reconcile_api_content_sidecars(sidecar: list, state: list) -> None:
    """Copy each state row's ``api_content`` onto its one matching sidecar row (mutates those dicts).

    Tiers, first with any candidate decides: unique stable id, unique row id, exact role+timestamp,
    same role and second, unique role+content. More than one candidate means no copy (never guess).
    """
    carriers = [m for m in state if isinstance(m, dict) and _api_content(m)]
    if not carriers or not sidecar:
        return
    side = [m for m in sidecar if isinstance(m, dict)]
    tiers = (
        lambda m: (str(v) if (v := _stable_id(m)) else None),
        _valid_row_id,
        lambda m: (m.get("role"), t) if (t := message_timestamp(m)) is not None else None,
        lambda m: (m.get("role"), int(t)) if (t := message_timestamp(m)) is not None else None,
        lambda m: (m.get("role"), _collapse(_content_text(m.get("content")))),
    )
    indexes: list[dict | None] = [None] * len(tiers)
    for st in carriers:
        target = None
        for i, tier in enumerate(tiers):
            probe = dict(st, content=_side_text(st, True)) if i == 4 else st
            wanted = tier(probe)
            if wanted is None:
                continue
            if indexes[i] is None:
                index: dict = {}
                for m in side:
                    k = tier(m)
                    if k is not None:
                        index.setdefault(k, []).append(m)
                indexes[i] = index
            found = indexes[i].get(wanted)
            if found:
                target = found[0] if len(found) == 1 else None
                break
        if target is not None and not _api_content(target):
            target["api_content"] = st["api_content"]


# ----------------------------------------------------------------------------------------------
# Lazily computed per-row facts
# ----------------------------------------------------------------------------------------------


class _Rows:
    """Sidecar rows (handles ``0..n-1``) then state rows; every fact is computed once, when first asked."""

    def __init__(self, sidecar: list, state: list):
        self.rows = sidecar + state
        self.n = len(sidecar)
        size = len(self.rows)
        self._ts = [_MISSING] * size
        self._norm = [_MISSING] * size
        self._fp = [_MISSING] * size
        self._facts: dict[tuple[str, int], Any] = {}

    def is_dict(self, h: int) -> bool:
        return isinstance(self.rows[h], dict)

    def role(self, h: int) -> Any:
        row = self.rows[h]
        return row.get("role") if isinstance(row, dict) else None

    def ts(self, h: int) -> float | None:
        value = self._ts[h]
        if value is _MISSING:
            value = self._ts[h] = message_timestamp(self.rows[h])
        return value

    def norm(self, h: int) -> str:
        """Whitespace-collapsed content of the row's own side (state user rows lose the workspace tag)."""
        value = self._norm[h]
        if value is _MISSING:
            row = self.rows[h]
            value = _collapse(_side_text(row, h >= self.n)) if isinstance(row, dict) else ""
            self._norm[h] = value
        return value

    def fp(self, h: int) -> tuple:
        """Index bucket for content/visible lookups: role plus the fingerprint of the side's text."""
        value = self._fp[h]
        if value is _MISSING:
            row = self.rows[h]
            if isinstance(row, dict):
                value = (row.get("role"), _fingerprint(_side_text(row, h >= self.n)))
            else:
                value = ("non_dict", repr(row))
            self._fp[h] = value
        return value

    def rawfp(self, h: int) -> tuple:
        """Index bucket for merge/dedup lookups (raw content: a state user row keeps its tag)."""
        row = self.rows[h]
        if h < self.n or not isinstance(row, dict) or row.get("role") != "user":
            return self.fp(h)
        return self.fact("rawfp", h)

    def fact(self, kind: str, h: int) -> Any:
        slot = (kind, h)
        value = self._facts.get(slot, _MISSING)
        if value is _MISSING:
            value = self._facts[slot] = self._compute(kind, h)
        return value

    def _compute(self, kind: str, h: int) -> Any:
        row = self.rows[h]
        if kind == "tcj":
            return _tool_calls_json(row) if isinstance(row, dict) else ""
        if kind == "merge":
            return _merge_key(row, self.fact("tcj", h), False)
        if kind == "dedup":
            return _merge_key(row, self.fact("tcj", h), True)
        if kind == "content":
            return _content_key(row, self.norm(h))
        if kind == "visible":
            return _visible_key(row, self.norm(h), self.fact("tcj", h))
        if kind == "rawfp":
            return (row.get("role"), _fingerprint(_content_text(row.get("content"))))
        if kind == "tokens":
            return _tokens(self.norm(h))
        if kind == "rowid":
            return _valid_row_id(row)
        raise KeyError(kind)

    def visible_equal(self, hs: int, hq: int) -> bool:
        """Visible keys equal; compares raw fields first so identical rows need no collapsing."""
        a, b = self.rows[hs], self.rows[hq]
        if isinstance(a, dict) and isinstance(b, dict):
            role = a.get("role")
            ca, cb = a.get("content"), b.get("content")
            if (
                role == b.get("role")
                and type(ca) is str
                and (ca is cb or ca == cb)
                and not (role == "user" and hs >= self.n and strip_workspace_tag(ca) is not ca)
                and _api_content(a) == _api_content(b)
            ):
                ta, tb = a.get("tool_calls"), b.get("tool_calls")
                if not ta and not tb:
                    return True
                return self.fact("tcj", hs) == self.fact("tcj", hq)
        return self.fact("visible", hs) == self.fact("visible", hq)

    def content_equal(self, hs: int, hq: int) -> bool:
        a, b = self.rows[hs], self.rows[hq]
        if isinstance(a, dict) and isinstance(b, dict):
            ca, cb = a.get("content"), b.get("content")
            if (
                a.get("role") == b.get("role")
                and type(ca) is str
                and (ca is cb or ca == cb)
                and (a.get("tool_call_id") or "") == (b.get("tool_call_id") or "")
                and (a.get("tool_name") or a.get("name") or "") == (b.get("tool_name") or b.get("name") or "")
                and _api_content(a) == _api_content(b)
                and not (a.get("role") == "user" and strip_workspace_tag(ca) is not ca)
            ):
                return True
            if self.fp(hs) != self.fp(hq):
                return False
        return self.fact("content", hs) == self.fact("content", hq)

    def fuzzy_equal(self, hs: int, hq: int) -> bool:
        """§3.2 fuzzy visible match between two rows (caller checks the key-set bound)."""
        ks, kq = self.fact("visible", hs), self.fact("visible", hq)
        if ks[0] == "non_dict" or kq[0] == "non_dict" or ks[0] != kq[0]:
            return False
        if _api_content(self.rows[hs]) != _api_content(self.rows[hq]):
            return False
        a, b = ks[1], kq[1]
        if not a or not b or len(a) > FUZZY_MAX_CHARS or len(b) > FUZZY_MAX_CHARS:
            return False
        if a in b or b in a:
            return True
        ta, tb = self.fact("tokens", hs), self.fact("tokens", hq)
        return bool(ta and tb and (ta in tb or tb in ta))


# ----------------------------------------------------------------------------------------------
# The append-only merge (§3.3)
# ----------------------------------------------------------------------------------------------


def _ends_in_interrupted_turn(sidecar: list) -> bool:
    """Last user/assistant row is an assistant ``_error`` with an assistant ``_partial`` since the last user."""
    idx = len(sidecar) - 1
    while idx >= 0:
        row = sidecar[idx]
        if isinstance(row, dict) and row.get("role") in ("user", "assistant"):
            break
        idx -= 1
    if idx < 0 or sidecar[idx].get("role") != "assistant" or not sidecar[idx].get("_error"):
        return False
    for row in reversed(sidecar[:idx]):
        if not isinstance(row, dict):
            continue
        if row.get("role") == "user":
            return False
        if row.get("role") == "assistant" and row.get("_partial"):
            return True
    return False


def _cold_reconstruction(state: list, watermark: float | None, boundary: float | None) -> list:
    if watermark is None:
        candidates = state
    elif watermark == 0:
        return []
    else:
        stamped = [(m, message_timestamp(m)) for m in state]
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
    """(text without image placeholders, image count) of a user row, for the native-image mirror rule."""
    images = 0
    if isinstance(content, list):
        texts = []
        for part in content:
            if not isinstance(part, dict):
                continue
            if part.get("type") in _IMAGE_PART_TYPES:
                images += 1
            elif isinstance(part.get("text"), str):
                texts.append(part["text"])
        text = " ".join(texts)
    else:
        text = _content_text(content)
    images += text.count(_SCREENSHOT)
    return _collapse(text.replace(_SCREENSHOT, " ")), images


class _Merge:
    def __init__(self, sidecar: list, state: list, watermark: float | None, boundary: float | None):
        self.t = _Rows(sidecar, state)
        self.n = len(sidecar)
        self.W = watermark
        self.B = boundary
        self.out = list(range(self.n))  # handles in output order
        self.seq = [h for h in range(self.n) if isinstance(sidecar[h], dict)]  # visible sequence
        self.p = 0  # prefix replay cursor into seq
        self.registered_state: list[int] = []
        self._S: Any = _MISSING
        self._index: dict | None = None
        self._side_buckets = 0
        self._fuzzy_ok: bool | None = None
        self._groups: dict | None = None  # (role, api) -> {visible key: [seq positions]}
        self._h_absorbed: dict = {}
        self._rowid_index: dict | None = None
        self._mid_index: dict | None = None
        self._ts_index: dict | None = None
        self._mirrored: set[int] = set()
        self._positions: dict[int, int] | None = None

    # -- lazily built registry lookups ----------------------------------------------------------

    @property
    def S(self) -> float | None:
        if self._S is _MISSING:
            values = [t for h in range(self.n) if (t := self.t.ts(h)) is not None]
            self._S = max(values) if values else None
        return self._S

    def _registered(self):
        yield from range(self.n)
        yield from self.registered_state

    def _index_add(self, h: int) -> None:
        index = self._index
        fp = self.t.fp(h)
        index.setdefault(fp, []).append(h)
        raw = self.t.rawfp(h)
        if raw != fp:
            index.setdefault(raw, []).append(h)

    def _ensure_index(self) -> dict:
        if self._index is None:
            self._index = {}
            for h in self.seq:
                self._index_add(h)
            self._side_buckets = len(self._index)
            for h in range(self.n):
                if not self.t.is_dict(h):
                    self._index_add(h)
            for h in self.registered_state:
                self._index_add(h)
        return self._index

    def _find(self, kind: str, h: int, sidecar_only: bool = False) -> int | None:
        """A registered row whose ``kind`` key equals row h's, or None."""
        key = self.t.fact(kind, h)
        if key[0] == "message_id":
            if self._mid_index is None:
                self._mid_index = {}
                for c in self._registered():
                    row = self.t.rows[c]
                    if isinstance(row, dict) and _stable_id(row):
                        self._mid_index.setdefault(str(_stable_id(row)), []).append(c)
            candidates = self._mid_index.get(key[1], ())
        else:
            bucket = self.t.fp(h) if kind in ("content", "visible") else self.t.rawfp(h)
            candidates = self._ensure_index().get(bucket, ())
        for c in candidates:
            if sidecar_only and c >= self.n:
                continue
            if self.t.fact(kind, c) == key:
                return c
        return None

    def _seq_pos(self, h: int) -> int:
        if len(self.seq) == self.n:
            return h
        if self._positions is None:
            self._positions = {c: pos for pos, c in enumerate(self.seq)}
        return self._positions[h]

    def fuzzy_allowed(self) -> bool:
        if self._fuzzy_ok is None:
            if len(self.seq) <= FUZZY_MAX_KEYS:
                self._fuzzy_ok = True
            else:
                self._ensure_index()
                if self._side_buckets > FUZZY_MAX_KEYS:
                    self._fuzzy_ok = False
                else:
                    distinct = {self.t.fact("visible", h) for h in self.seq}
                    self._fuzzy_ok = len(distinct) <= FUZZY_MAX_KEYS
        return self._fuzzy_ok

    def _visible_groups(self) -> dict:
        if self._groups is None:
            self._groups = {}
            for pos, h in enumerate(self.seq):
                key = self.t.fact("visible", h)
                group = self._groups.setdefault((key[0], _api_content(self.t.rows[h])), {})
                group.setdefault(key, []).append((pos, h))
        return self._groups

    # -- rules ----------------------------------------------------------------------------------

    def _absorb(self, h: int, target: int | None) -> None:
        """Drop state row h; copy display-only keys it has and its kept duplicate lacks."""
        if target is None:
            return
        row, kept = self.t.rows[h], self.t.rows[target]
        if not isinstance(row, dict) or not isinstance(kept, dict) or DISPLAY_ONLY_KEYS.isdisjoint(row):
            return
        extra = {k: row[k] for k in DISPLAY_ONLY_KEYS if k in row and k not in kept}
        if extra:
            self.t.rows[target] = {**kept, **extra}

    def _native_image_mirror(self, h: int) -> bool:
        row = self.t.rows[h]
        if not isinstance(row, dict) or row.get("role") != "user" or not isinstance(row.get("content"), list):
            return False
        text, images = _screenshot_projection(row["content"])
        ts = self.t.ts(h)
        if not images or ts is None:
            return False
        if self._ts_index is None:
            self._ts_index = {}
            for c in range(self.n):
                if self.t.role(c) == "user" and self.t.ts(c) is not None:
                    self._ts_index.setdefault(self.t.ts(c), []).append(c)
        matches = []
        for c in self._ts_index.get(ts, ()):
            side = self.t.rows[c]
            if c in self._mirrored or _screenshot_projection(side.get("content"))[0] != text:
                continue
            sid_a, sid_b = _stable_id(row), _stable_id(side)
            rid_a, rid_b = self.t.fact("rowid", h), self.t.fact("rowid", c)
            if (sid_a and sid_b and str(sid_a) != str(sid_b)) or (rid_a is not None and rid_b is not None and rid_a != rid_b):
                continue
            matches.append(c)
        if len(matches) != 1:
            return False
        self._mirrored.add(matches[0])
        return True

    def _same_rowid(self, h: int) -> list[int]:
        rid = self.t.fact("rowid", h)
        if rid is None:
            return []
        if self._rowid_index is None:
            self._rowid_index = {}
            for c in self._registered():
                crid = self.t.fact("rowid", c)
                if crid is not None:
                    self._rowid_index.setdefault(crid, []).append(c)
        return self._rowid_index.get(rid, [])

    def _api_conflict(self, h: int, c: int) -> bool:
        a, b = _api_content(self.t.rows[h]), _api_content(self.t.rows[c])
        return bool(a and b and a != b)

    def _row_id_match(self, h: int) -> int | None:
        same = self._same_rowid(h)
        if len(same) != 1:
            return None
        c = same[0]
        row, other = self.t.rows[h], self.t.rows[c]
        sid_a, sid_b = _stable_id(row), _stable_id(other)
        if sid_a and sid_b and str(sid_a) != str(sid_b):
            return None
        if self.t.ts(h) is None or self.t.ts(c) is None or self._api_conflict(h, c):
            return None
        return c

    def _visible_duplicate(self, h: int) -> bool:
        """Rule h: matches a sidecar visible key that still has unabsorbed sidecar rows."""
        key = self.t.fact("visible", h)
        if key[0] == "non_dict":
            return False
        target = self._find("visible", h, sidecar_only=True)
        if target is not None:
            bucket = self._ensure_index().get(self.t.fp(h), ())
            members = [
                (self._seq_pos(c), c)
                for c in bucket
                if c < self.n and self.t.is_dict(c) and self.t.fact("visible", c) == key
            ]
        elif key[1] and self.fuzzy_allowed():
            members = None
            for cand_key, cand_members in self._visible_groups().get((key[0], _api_content(self.t.rows[h])), {}).items():
                if cand_key[1] and self.t.fuzzy_equal(h, cand_members[0][1]):
                    key, members = cand_key, cand_members
                    break
            if members is None:
                return False
        else:
            return False
        absorbed = sum(1 for pos, _ in members if pos < self.p) + self._h_absorbed.get(key, 0)
        if absorbed >= len(members):
            return False
        self._h_absorbed[key] = self._h_absorbed.get(key, 0) + 1
        self._absorb(h, members[0][1])
        return True

    def _register(self, h: int) -> None:
        self.registered_state.append(h)
        if self._index is not None:
            self._index_add(h)
        row = self.t.rows[h]
        if self._mid_index is not None and isinstance(row, dict) and _stable_id(row):
            self._mid_index.setdefault(str(_stable_id(row)), []).append(h)
        if self._rowid_index is not None and self.t.fact("rowid", h) is not None:
            self._rowid_index.setdefault(self.t.fact("rowid", h), []).append(h)

    def _is_tool_call_assistant(self, h: int) -> bool:
        row = self.t.rows[h]
        return isinstance(row, dict) and row.get("role") == "assistant" and bool(row.get("tool_calls"))

    def _insert_chronologically(self, h: int) -> None:
        t = self.t
        ts = t.ts(h)
        role = t.role(h)
        out = self.out
        if ts is None:
            out.append(h)
            self._register(h)
            return
        empty_call = self._is_tool_call_assistant(h) and not t.norm(h)
        idx = None
        for i, o in enumerate(out):
            ots = t.ts(o)
            if ots is None:
                continue
            if ots > ts:
                idx = i
                break
            if ots == ts and t.role(o) == "assistant":
                if role == "user" or (empty_call and t.norm(o)):
                    idx = i
                    break
        if idx is None:
            out.append(h)
            self._register(h)
            return
        if idx == 0:
            return  # nothing older survives in the sidecar: refuse to resurrect compacted-out rows
        moved = True
        while moved and idx < len(out):
            moved = False
            prev, cur = out[idx - 1], out[idx]
            if t.role(cur) == "tool" and (self._is_tool_call_assistant(prev) or t.role(prev) == "tool"):
                idx += 1
                moved = True
            elif t.role(prev) == role and t.ts(cur) is not None and t.ts(cur) == t.ts(prev):
                idx += 1
                moved = True
        out.insert(idx, h)
        self._register(h)

    def _place(self, h: int) -> None:
        """Rules c–j for a state row the prefix replay did not absorb."""
        t = self.t
        W, ts = self.W, t.ts(h)
        target = self._row_id_match(h)  # c
        if target is not None:
            self._absorb(h, target)
            return
        merge_seen = self._find("merge", h)
        if W is not None and ts is not None and merge_seen is None:  # d
            consumed = self.p >= len(self.seq)
            S, B = self.S, self.B
            advanced = (S is not None and S > W) or (B is not None and B < W and consumed)
            if ts > W:
                if not advanced or (S is not None and ts <= S):
                    return
            elif ts < W:
                if self._find("content", h) is None:
                    return
            elif t.role(h) == "user" and self._find("content", h) is None:
                return
        dedup_seen = self._find("dedup", h)  # e
        if dedup_seen is not None:
            self._absorb(h, dedup_seen)
            return
        S = self.S
        merge_kind = t.fact("merge", h)[0]
        if S is not None and ts is not None and ts <= S and merge_seen is not None:  # f
            self._absorb(h, merge_seen)
            return
        if merge_kind == "message_id" and merge_seen is not None:  # g
            self._absorb(h, merge_seen)
            return
        if self._visible_duplicate(h):  # h
            return
        conflict = any(self._api_conflict(h, c) for c in self._same_rowid(h))
        if merge_kind == "legacy" and S is not None and ts is not None and ts <= S and not conflict:  # i
            content_seen = self._find("content", h)
            consumed = self.p >= len(self.seq)
            if W is not None and ts == W and consumed and t.role(h) != "user" and content_seen is None:
                pass  # fall through to j
            elif t.rows[h].get("tool_calls"):
                if content_seen is not None:
                    self._insert_chronologically(h)
                else:
                    self._absorb(h, None)
                return
            elif t.role(h) == "user" and content_seen is None:
                self._insert_chronologically(h)
                return
            else:
                self._absorb(h, content_seen)
                return
        self.out.append(h)  # j
        self._register(h)

    def run(self) -> list:
        t, seq = self.t, self.seq
        for h in range(self.n, len(t.rows)):
            if self._native_image_mirror(h):  # a
                continue
            p = self.p
            if p < len(seq) and (  # b: prefix replay
                t.visible_equal(h, seq[p])
                or (t.is_dict(h) and t.norm(h) and self.fuzzy_allowed() and t.fuzzy_equal(h, seq[p]))
            ):
                self._absorb(h, seq[p])
                self.p = p + 1
                continue
            self._place(h)
        return [t.rows[h] for h in self.out]


def merge_session_messages_append_only(
    sidecar: list | None,
    state: list | None,
    *,
    truncation_watermark: Any = None,
    truncation_boundary: Any = None,
) -> list:
    """The sidecar rows in order plus the state rows it lacks, honouring the truncation watermark (§3.3).

    Never removes or reorders a sidecar row. ``truncation_watermark`` 0.0 on an empty sidecar is the
    truncate-to-empty sentinel; rows older than the watermark and unknown to the sidecar never return.
    """
    sidecar = list(sidecar or [])
    state = list(state or [])
    _reconcile_api_content_sidecars(sidecar, state)
    if not state:
        return sidecar
    watermark = parse_timestamp(truncation_watermark)
    boundary = parse_timestamp(truncation_boundary)
    if not sidecar:
        return _cold_reconstruction(state, watermark, boundary)
    if _ends_in_interrupted_turn(sidecar):
        return sidecar
    return _Merge(sidecar, state, watermark, boundary).run()


# ----------------------------------------------------------------------------------------------
# Delta after a model-facing context (§3.4) and the reconciled view (§3.5)
# ----------------------------------------------------------------------------------------------


def state_db_delta_after_context(context: list | None, state: list | None) -> list:
    """The state rows newer than a context that state.db may mirror; all of them when unaligned."""
    context = list(context or [])
    state = list(state or [])
    if not context or not state:
        return state
    _reconcile_api_content_sidecars(context, state)
    t = _Rows(context, state)
    nc, ns = len(context), len(state)
    best, best_o = 0, 0
    for o in range(nc):
        if best >= nc - o:
            break
        run = 0
        while o + run < nc and run < ns and t.content_equal(nc + run, o + run):
            run += 1
        if run > best:
            best, best_o = run, o
    first = context[0]
    recovered_head = isinstance(first, dict) and first.get("role") == "user" and bool(first.get("_recovered"))
    if best < 2 and not (best == 1 and best_o == 0 and recovered_head):
        return state
    ci = best  # the context cursor restarts at the run length, whatever the offset (reference quirk)
    if ci >= nc:
        return state[best:]
    for si in range(best, ns):
        if t.content_equal(nc + si, ci):
            ci += 1
            if ci >= nc:
                return state[si + 1 :]
    return state[best:]


def _anchor_text(msg: dict) -> str:
    content = msg.get("content")
    if isinstance(content, list):
        text = " ".join(p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    else:
        text = content if isinstance(content, str) else ""
    return _collapse(text)[:160]


def _anchor_ts(value: Any) -> float | None:
    parsed = parse_timestamp(value)
    if parsed is not None or not isinstance(value, str):
        return parsed
    try:
        moment = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def _state_db_anchor_index(state: list, anchor: Any) -> int | None:
    """Index of the last state row matching the compression anchor key, or None."""
    if not isinstance(anchor, dict) or not anchor.get("role"):
        return None
    anchor_ts = _anchor_ts(anchor.get("ts"))
    if anchor_ts is None:
        return None
    anchor_text = _collapse(anchor.get("text") or "")[:160] if isinstance(anchor.get("text"), str) else ""
    try:
        anchor_attachments = int(anchor.get("attachments") or 0)
    except (TypeError, ValueError):
        anchor_attachments = 0
    found = None
    for i, row in enumerate(state):
        if not isinstance(row, dict) or row.get("role") != anchor["role"]:
            continue
        attachments = row.get("attachments")
        if (len(attachments) if isinstance(attachments, list) else 0) != anchor_attachments:
            continue
        if anchor_text and _anchor_text(row) != anchor_text:
            continue
        row_ts = message_timestamp(row)
        if row_ts is None:
            row_ts = parse_timestamp(row.get("_ts"))
        if row_ts is not None and abs(row_ts - anchor_ts) <= 1e-6:
            found = i
    return found


def _is_merge_key_prefix(prefix: list, full: list) -> bool:
    return len(prefix) <= len(full) and all(
        message_merge_key(a) == message_merge_key(b) for a, b in zip(prefix, full, strict=False)
    )


def reconciled_state_db_messages_for_session(
    session: Any, *, prefer_context: bool = False, state_messages: list | None = None
) -> list:
    """The session's transcript (or, with ``prefer_context``, its model-facing context) merged with state.db.

    Reads state.db through ``api.models.get_state_db_session_messages(sid)`` when ``state_messages`` is
    None. A compacted context is returned as-is unless its anchor is found in state.db (§3.5).
    """
    if session is None:
        return []
    messages = getattr(session, "messages", None)
    messages = messages if isinstance(messages, list) else []
    context = getattr(session, "context_messages", None)
    from_context = bool(prefer_context and isinstance(context, list) and context)
    local = context if from_context else messages
    if state_messages is None:
        import api.models  # looked up at call time: tests and the lead rebind it

        state_messages = api.models.get_state_db_session_messages(getattr(session, "session_id", None))
    state = list(state_messages or [])
    if from_context:
        claimed_cli = bool(getattr(session, "is_cli_session", False)) and not getattr(session, "read_only", False)
        if claimed_cli and len(messages) > len(context) and _is_merge_key_prefix(context, messages):
            local = messages
        elif _context_messages_include_compression_marker(local):
            anchor = getattr(session, "compression_anchor_message_key", None)
            if not anchor:
                return list(local)
            idx = _state_db_anchor_index(state, anchor)
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

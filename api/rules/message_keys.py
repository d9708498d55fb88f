"""Message identity for reconciliation: the four message keys, compaction markers, api_content
reconciliation (docs/reconciliation.md, "Message keys"; docs/session-model.md, "Compression").

A transcript row and the agent's copy of it can differ in whitespace, in a workspace tag the agent
prepends to user rows, or in an ``api_content`` the agent stored; the keys say when two rows are the
same message. The text-derived facts (collapsed text, fingerprint, token string) are memoised by the
text itself across calls, since every chat turn reconciles the same transcript strings again;
``api.rules.row_facts`` holds the per-row facts one merge computes and the fuzzy likeness built on them.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from itertools import compress, repeat
from typing import Any, Protocol

from api.rules.messages import content_as_text, merge_timestamp

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
INVALID_ROW_ID = object()
_WORKSPACE_TAG = re.compile(r"\s*\[Workspace(?:::v1)?:[^\]\n]*\]\s*")
_FIRST_TOKEN = re.compile(r"\s*(\S{1,16})")
_WORD = re.compile(r"\w+")
_MARKER_PART_TYPES = frozenset({"text", "input_text", "output_text"})
_MEMO_MAX_CHARS = 16_000_000  # per memo; cleared when exceeded, so memory stays bounded


# ----------------------------------------------------------------------------------------------
# Text helpers
# ----------------------------------------------------------------------------------------------


class _Memoised(Protocol):
    cache: dict[Any, str]  # keyed by text; looked up with any content, which then misses

    def __call__(self, text: str, /) -> str: ...


def _memoised(fn: Callable[[str], str]) -> _Memoised:
    """Memoise a pure str -> str function by its argument (strings are immutable, so this is exact)."""
    table: dict[str, str] = {}
    size = [0]

    def cached(text: str) -> str:
        value = table.get(text)
        if value is None:
            value = fn(text)
            size[0] += len(text)
            if size[0] > _MEMO_MAX_CHARS:
                table.clear()
                size[0] = len(text)
            table[text] = value
        return value

    cached.cache = table  # type: ignore[attr-defined]
    return cached  # type: ignore[return-value]  # a function with its ``cache`` attribute set above


@_memoised
def collapse(text: str) -> str:
    """Whitespace runs become one space; leading/trailing whitespace goes."""
    return " ".join(text.split())


@_memoised
def fingerprint(text: str) -> str:
    """First 16 chars of the first token and last 16 of the last token (``""`` for blank text).

    Texts equal after ``collapse`` have equal fingerprints; only the two ends are read, so this
    indexes rows for collapsed-text lookups without collapsing them.
    """
    match = _FIRST_TOKEN.match(text)
    if match is None:
        return ""
    tail = text[-64:].rstrip()
    if len(tail) < 20 and len(text) > 64:
        tail = text.rstrip()
    return match.group(1) + "\x00" + tail.rsplit(None, 1)[-1][-16:]


@_memoised
def tokens(text: str) -> str:
    """Casefolded ``\\w+`` tokens joined by single spaces (the fuzzy match's token string)."""
    return " ".join(_WORD.findall(text.casefold()))


def clear_memos() -> None:
    """Forget every memoised text and list (benchmarks use it to measure a first, cold call)."""
    for memo in (collapse, fingerprint, tokens):
        memo.cache.clear()
    for clear in _MEMO_CLEARERS:
        clear()


# Caches of pure functions, not state (an app owns none of them): other memos of texts or lists, registered where
# they live.
_MEMO_CLEARERS: list[Callable[[], None]] = []


def forget_with_memos(clear: Callable[[], None]) -> None:
    """Have ``clear_memos`` call ``clear`` too."""
    _MEMO_CLEARERS.append(clear)


class KnownTexts:
    """Texts already seen to pass one test, so a list of texts asked about again (every chat turn asks about
    the same transcript, a few rows longer) costs a comparison with the list asked about before and one set
    lookup per newer text. Bounded: forgotten when it grows past ``max_size`` texts or ``_MEMO_MAX_CHARS``
    characters (each chat turn adds its texts, and a text may be long)."""

    def __init__(self, test: Callable[[Any], bool], max_size: int = 200_000):
        self.test, self.max_size = test, max_size
        self.known: set[Any] = set()
        self._chars = 0  # of the known texts
        self.recent: list[list[Any]] = []  # lists whose every text passed, newest first
        forget_with_memos(self.clear)

    def failing(self, texts: list[Any]) -> set[Any]:
        """The distinct texts that fail the test; ``TypeError`` if one is unhashable."""
        start, size = 0, len(texts)
        for k, passed in enumerate(
            self.recent
        ):  # a list known to pass that starts this one: compared at C speed
            length = len(passed)
            if start < length <= size and (texts == passed if length == size else texts[:length] == passed):
                if length == size and k == 0:
                    return set()  # the list asked about last
                start = length
        rest = texts[start:] if start else texts
        known = self.known
        if all(map(known.__contains__, rest)):  # no set built when every text is known
            self._remember(texts)
            return set()
        unknown = set(rest) - known
        passing = {text for text in unknown if self.test(text)}
        if len(known) > self.max_size or self._chars > _MEMO_MAX_CHARS:
            known.clear()
            self._chars = 0
        known.update(passing)
        self._chars += sum(len(text) for text in passing if isinstance(text, str))
        if len(passing) == len(unknown):
            self._remember(texts)
        return unknown - passing

    def _remember(self, texts: list[Any]) -> None:
        latest = self.recent[0] if self.recent else None
        if latest is not None and len(latest) >= len(texts) and latest[: len(texts)] == texts:
            return  # already known: a list asked about before, or its start
        self.recent.insert(0, list(texts))
        del self.recent[RECENT_LISTS:]

    def clear(self) -> None:
        self.known.clear()
        self._chars = 0
        self.recent.clear()


RECENT_LISTS = 4  # lists remembered by each memo that compares a list with lists asked about before


def strip_workspace_tag(text: str) -> str:
    """Drop a leading ``[Workspace::v1: …]`` / ``[Workspace: …]`` tag; returns ``text`` itself if none."""
    head = text[:1]
    if head == "[" or head.isspace():
        match = _WORKSPACE_TAG.match(text)
        if match is not None:
            return text[match.end() :]
    return text


UNTAGGED_TEXTS = KnownTexts(lambda content: type(content) is str and strip_workspace_tag(content) is content)


def side_text(msg: dict[str, Any], state_side: bool) -> str:
    """The content as a key sees it: the state side drops a user row's workspace tag."""
    text = content_as_text(msg.get("content"))
    if state_side and msg.get("role") == "user":
        text = strip_workspace_tag(text)
    return text


# ----------------------------------------------------------------------------------------------
# Timestamps, ids and keys
# ----------------------------------------------------------------------------------------------


def api_content(msg: dict[str, Any]) -> str | None:
    value = msg.get("api_content")
    return value if isinstance(value, str) and value else None


def tool_calls_json(msg: dict[str, Any]) -> str:
    calls = msg.get("tool_calls")
    if not calls:
        return ""
    try:
        return json.dumps(calls, sort_keys=True)
    except (TypeError, ValueError):
        return repr(calls)


def same_json(a: Any, b: Any) -> bool:
    """True only if ``json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)`` (False may be unsure)."""
    kind = type(a)
    if kind is not type(b):
        return False
    if kind is dict:
        return a.keys() == b.keys() and all(same_json(v, b[k]) for k, v in a.items())
    if kind is list:
        return len(a) == len(b) and all(map(same_json, a, b))
    if kind is float:
        return repr(a) == repr(b)
    return kind in (str, int, bool, type(None)) and a == b


def stable_id(msg: dict[str, Any]) -> Any:
    return msg.get("id") or msg.get("message_id")


def ts_seconds(raw: Any) -> str:
    """The merge key's timestamp slot: whole seconds, ``""`` if missing, the raw text if not numeric."""
    if raw is None or raw == "":
        return ""
    try:
        value = float(raw)
    except (TypeError, ValueError, OverflowError):
        return str(raw)
    if not math.isfinite(value):
        return f"<invalid:{raw}>"
    return str(int(value))


def row_id(msg: Any) -> Any:
    """The state.db row id under any alias: an int, ``None``, or ``INVALID_ROW_ID`` (bad or conflicting)."""
    if not isinstance(msg, dict):
        return None
    found = None
    for alias in ROW_ID_ALIASES:
        value = msg.get(alias)
        if value is None:
            continue
        if isinstance(value, bool):
            return INVALID_ROW_ID
        if isinstance(value, int):
            parsed = value
        elif isinstance(value, float) and value.is_integer():
            parsed = int(value)
        elif isinstance(value, str) and value.strip().isdigit():
            parsed = int(value.strip())
        else:
            return INVALID_ROW_ID
        if parsed < 0 or (found is not None and found != parsed):
            return INVALID_ROW_ID
        found = parsed
    return found


def valid_row_id(msg: Any) -> int | None:
    rid = row_id(msg)
    return None if rid is INVALID_ROW_ID else rid


def _with_api(key: tuple[Any, ...], api: str | None) -> tuple[Any, ...]:
    return key + (api,) if api else key


def build_merge_key(msg: Any, tcj: str, full_precision: bool) -> tuple[Any, ...]:
    if not isinstance(msg, dict):
        return ("non_dict", repr(msg))
    sid = stable_id(msg)
    if sid:
        return _with_api(("message_id", str(sid)), api_content(msg))
    raw_ts = msg.get("timestamp")
    key = (
        "legacy",
        msg.get("role"),
        content_as_text(msg.get("content")),
        str(raw_ts or "") if full_precision else ts_seconds(raw_ts),
        msg.get("tool_call_id") or "",
        msg.get("tool_name") or msg.get("name") or "",
        tcj,
    )
    return _with_api(key, api_content(msg))


def build_content_key(msg: Any, norm: str) -> tuple[Any, ...]:
    if not isinstance(msg, dict):
        return ("non_dict", repr(msg))
    key = (
        msg.get("role"),
        norm,
        msg.get("tool_call_id") or "",
        msg.get("tool_name") or msg.get("name") or "",
    )
    return _with_api(key, api_content(msg))


def build_visible_key(msg: Any, norm: str, tcj: str) -> tuple[Any, ...]:
    if not isinstance(msg, dict):
        return ("non_dict", repr(msg))
    return _with_api((msg.get("role"), norm, tcj), api_content(msg))


def message_merge_key(msg: Any) -> tuple[Any, ...]:
    """Stable id if any, else role, content, whole-second timestamp and tool fields (+ api_content)."""
    return build_merge_key(msg, tool_calls_json(msg) if isinstance(msg, dict) else "", False)


def message_dedup_key(msg: Any) -> tuple[Any, ...]:
    """The merge key with the timestamp at full precision."""
    return build_merge_key(msg, tool_calls_json(msg) if isinstance(msg, dict) else "", True)


def message_content_key(msg: Any, *, state_side: bool = False) -> tuple[Any, ...]:
    """Role, collapsed content and tool ids (+ api_content)."""
    if not isinstance(msg, dict):
        return ("non_dict", repr(msg))
    return build_content_key(msg, collapse(side_text(msg, state_side)))


def message_visible_key(msg: Any, *, state_side: bool = False) -> tuple[Any, ...]:
    """Role, collapsed content and tool calls (+ api_content): what a person sees of the row."""
    if not isinstance(msg, dict):
        return ("non_dict", repr(msg))
    return build_visible_key(msg, collapse(side_text(msg, state_side)), tool_calls_json(msg))


# ----------------------------------------------------------------------------------------------
# Compaction markers (docs/session-model.md, "Compression")
# ----------------------------------------------------------------------------------------------


def _head(text: str) -> str:
    """Lowercased start of the text after leading whitespace (enough for every marker prefix)."""
    head = text[:96].lstrip()
    if not head and len(text) > 96:
        head = text.lstrip()[:96]
    return head.lower()


def _could_be_marker(text: str) -> bool:
    first = text[:1]
    return first in ("[", "c", "C") or first.isspace()


def is_context_compression_marker(msg: Any) -> bool:
    """The agent's compaction summary row (or one of its preserved-context notes)."""
    if not isinstance(msg, dict) or not msg.get("role") or msg.get("role") == "tool":
        return False
    content = msg.get("content")
    if isinstance(content, list):
        text = "\n".join(
            p["text"]
            for p in content
            if isinstance(p, dict) and p.get("type") in _MARKER_PART_TYPES and isinstance(p.get("text"), str)
        )
    elif isinstance(content, str):
        text = content
    else:
        return False
    if not _could_be_marker(text):
        return False
    head = _head(text)
    return (
        head.startswith("[context compaction")
        or bool(msg.get("_compressed_summary") and head.startswith("context compaction"))
        or head.startswith("[your active task list was preserved across context compression]")
        or head.startswith("[session arc summary")
    )


_MARKER_FIRSTS = frozenset("[cC")


def _marker_candidates(messages: list[Any]) -> Any:
    """Rows that could be markers: text starting with ``[``, ``c``/``C`` or whitespace, or non-text content.

    Decided column-wise at C speed when every row is a dict with text content (the usual case).
    """
    try:
        contents: list[Any] = list(map(dict.get, messages, repeat("content")))
        firsts: list[str] = list(map(str.__getitem__, contents, repeat(slice(0, 1))))
    except TypeError:  # a non-dict row or non-text content: the same test row by row
        return [
            m
            for m in messages
            if not (type(m) is dict and type(m.get("content")) is str and not _could_be_marker(m["content"]))
        ]
    wanted = {f for f in set(firsts) if f in _MARKER_FIRSTS or f.isspace()}
    return compress(messages, map(wanted.__contains__, firsts)) if wanted else ()


def _opens_with_compaction_wording(text: str) -> bool:
    head = _head(text)
    return head.startswith("[context compaction") or head.startswith("context compaction")


def _is_narrow_marker(msg: Any) -> bool:
    if not is_context_compression_marker(msg):
        return False
    content = msg.get("content")
    if isinstance(content, list):
        text = "".join(p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    else:
        text = content if isinstance(content, str) else ""
    return _opens_with_compaction_wording(text)


_PLAIN_TEXTS = KnownTexts(
    lambda content: not (type(content) is str and _opens_with_compaction_wording(content))
)


# Texts whose rows a key reads as they are: strings that open with neither a workspace tag nor the
# compaction wording. A context of such rows holds no compaction marker.
PLAIN_UNTAGGED_TEXTS = KnownTexts(
    lambda content: (
        type(content) is str
        and strip_workspace_tag(content) is content
        and not _opens_with_compaction_wording(content)
    )
)


def context_messages_include_compression_marker(messages: Any) -> bool:
    """A detector hit whose own text opens with the compaction wording (the narrow test).

    Texts already seen not to open with that wording are remembered (``KnownTexts``), so a context asked
    about again costs one set lookup per row.
    """
    if not isinstance(messages, list):
        return False
    try:
        wording = _PLAIN_TEXTS.failing(list(map(dict.get, messages, repeat("content"))))
    except TypeError:  # a non-dict row or list content: row by row
        return any(map(_is_narrow_marker, _marker_candidates(messages)))
    return bool(wording) and any(_is_narrow_marker(m) for m in messages if m.get("content") in wording)


# ----------------------------------------------------------------------------------------------
# api_content reconciliation
# ----------------------------------------------------------------------------------------------


def _tier_keys(state_side: bool) -> tuple[Callable[[dict[str, Any]], Any], ...]:
    def by_stable_id(m: dict[str, Any]) -> Any:
        sid = stable_id(m)
        return str(sid) if sid else None

    def by_exact_ts(m: dict[str, Any]) -> Any:
        ts = merge_timestamp(m)
        return None if ts is None else (m.get("role"), ts)

    def by_second(m: dict[str, Any]) -> Any:
        ts = merge_timestamp(m)
        return None if ts is None else (m.get("role"), int(ts))

    def by_content(m: dict[str, Any]) -> Any:
        return (m.get("role"), collapse(side_text(m, state_side)))

    return (by_stable_id, valid_row_id, by_exact_ts, by_second, by_content)


def _any_api_content(rows: list[Any]) -> bool:
    try:
        return any(map(dict.get, rows, repeat("api_content")))  # a C-level scan when every row is a dict
    except TypeError:
        return any(isinstance(m, dict) and m.get("api_content") for m in rows)


def reconcile_api_content_sidecars(sidecar: list[Any], state: list[Any]) -> None:
    """Copy each state row's ``api_content`` onto its one matching sidecar row (mutates that dict).

    Tiers, and the first tier with any candidate decides: unique stable id, unique row id, exact
    role+timestamp, same role and second, unique role+content. Several candidates: no copy (never guess).
    """
    if not sidecar or not _any_api_content(state):
        return
    carriers = [m for m in state if isinstance(m, dict) and api_content(m)]
    side = [m for m in sidecar if isinstance(m, dict)]
    side_tiers, state_tiers = _tier_keys(False), _tier_keys(True)
    indexes: list[dict[Any, list[dict[str, Any]]] | None] = [None] * len(side_tiers)
    for st in carriers:
        target = None
        for i, tier in enumerate(state_tiers):
            wanted = tier(st)
            if wanted is None:
                continue
            index = indexes[i]
            if index is None:
                index = indexes[i] = {}
                for m in side:
                    key = side_tiers[i](m)
                    if key is not None:
                        index.setdefault(key, []).append(m)
            found = index.get(wanted)
            if found:
                target = found[0] if len(found) == 1 else None
                break
        if target is not None and not api_content(target):
            target["api_content"] = st["api_content"]

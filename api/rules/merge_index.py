"""Fast lookups for the append-only merge (``api.rules.reconcile``) and the context delta (``api.rules.context_view``).

The indexes group registered rows (transcript rows plus the state rows a merge has added so far) by
one fact and load the transcript side only when a lookup could hit it; ``raw_prefix`` finds the
leading run where two row lists agree on raw content and role, column-wise at C speed.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable
from itertools import accumulate, compress, repeat
from operator import contains, eq, is_not, not_
from typing import Any, Protocol

from api.rules.row_facts import Rows


class _Merge(Protocol):
    """What the indexes read of a merge in progress (``api.rules.merge_state.MergeState``)."""

    facts: Rows
    transcript_len: int
    registered_state: list[int]

    def stable_key(self, handle: int) -> str | None: ...


class _Index:
    """Handles grouped by one fact: local rows (loaded only when a lookup could hit one) and a growing
    list of state rows (those the merge registered, unless another list is given)."""

    def __init__(self, merge: _Merge, fact: str, state_rows: list[int] | None = None):
        self.merge, self.fact = merge, fact
        self.state_rows = merge.registered_state if state_rows is None else state_rows
        self.table: dict[Any, list[int]] = {}
        self.local_loaded = False
        self.state_upto = 0

    def _value(self, handle: int) -> Any:
        return (
            self.merge.stable_key(handle) if self.fact == "mid" else self.merge.facts.fact(self.fact, handle)
        )

    def get(self, value: Any, with_local: bool = True) -> list[int]:
        return self.synced(with_local).get(value, [])

    def synced(self, with_local: bool = True) -> dict[Any, list[int]]:
        """The table, holding every registered row (and the local rows, if ``with_local`` or loaded before)."""
        merge = self.merge
        if with_local and not self.local_loaded:
            self.local_loaded = True
            for handle in range(merge.transcript_len):
                its_value = self._value(handle)
                if its_value is not None:
                    self.table.setdefault(its_value, []).append(handle)
        registered = self.state_rows
        while self.state_upto < len(registered):
            handle = registered[self.state_upto]
            its_value = self._value(handle)
            if its_value is not None:
                self.table.setdefault(its_value, []).append(handle)
            self.state_upto += 1
        return self.table


class _FingerprintIndex:
    """Registered rows by fingerprint. A few lookups scan the local list at C speed; many build a dict."""

    def __init__(self, merge: _Merge):
        self.merge = merge
        self.local: list[Any] | None = None
        self.table: dict[str, list[int]] | None = None
        self.scans = 0
        self.state: dict[str | None, list[int]] = {}
        self.state_upto = 0

    def local_list(self) -> list[Any]:
        if self.local is None:
            self.local = self.merge.facts.local_fingerprints()
        return self.local

    def get(self, fingerprint: str | None) -> list[int]:
        if fingerprint is None:
            return []
        local = self.local_list()
        if self.table is None and self.scans < 16:
            self.scans += 1
            found, i = [], -1
            while True:
                try:
                    i = local.index(fingerprint, i + 1)
                except ValueError:
                    break
                found.append(i)
        else:
            if self.table is None:
                self.table = {}
                for handle, its_fingerprint in enumerate(local):
                    if its_fingerprint is not None:
                        self.table.setdefault(its_fingerprint, []).append(handle)
            found = list(self.table.get(fingerprint, ()))
        registered, facts = self.merge.registered_state, self.merge.facts
        while self.state_upto < len(registered):
            handle = registered[self.state_upto]
            if facts.fingerprint(handle) is not None:
                self.state.setdefault(facts.fingerprint(handle), []).append(handle)
            self.state_upto += 1
        return found + self.state.get(fingerprint, [])


def raw_prefix(
    state: list[Any], local: list[Any], columns: frozenset[str]
) -> tuple[int, set[int], list[Any]] | None:
    """The leading run where state and local rows have equal raw content and role, at C speed.

    Returns (run length, rows in it that need a closer look, state contents): rows with non-text
    content, any of the keys ``columns`` on either side, or (state user rows) a possible workspace
    tag. ``None`` when a row is not a dict.
    """
    try:
        contents: list[Any] = list(map(dict.get, state, repeat("content")))
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


def _common_prefix(a: list[Any], b: list[Any]) -> int:
    if a == b:  # identical columns compare by identity, almost for free
        return len(a)
    same = list(map(eq, a, b))
    return same.index(False) if False in same else min(len(a), len(b))


class Containment:
    """Which texts of a growing list contain a query, or lie inside it, without a loop over them all.

    Texts and queries are words separated by single spaces (collapsed text, token strings). A text inside
    a query has its middle words (all but the first and last, which may be cut) among the query's words, so
    texts are indexed by their longest middle word and only texts of one or two words need a direct check.
    Texts holding a query are found by one search through all texts joined. Every position returned has
    been checked with ``in``.
    """

    _SEPARATOR = "\x00"

    def __init__(self) -> None:
        self.texts: list[str] = []
        self._by_anchor: dict[str, list[int]] = {}  # each text's longest middle word -> texts
        self._few_words: list[int] = []  # non-empty texts with no middle word
        self._joined: str | None = None  # the texts joined by _SEPARATOR, built on first use
        self._starts: list[int] = []  # where each text starts in _joined

    def extend(self, texts: list[str]) -> None:
        by_anchor = self._by_anchor
        for i, text in enumerate(texts, len(self.texts)):
            if not text:
                continue
            middle = text.split(" ")[1:-1]
            if middle:
                by_anchor.setdefault(max(middle, key=len), []).append(i)
            else:
                self._few_words.append(i)
        self.texts.extend(texts)
        self._joined = None

    def inside(self, query: str, limit: int) -> list[int]:
        """Positions below ``limit`` of non-empty texts that are substrings of ``query``, ascending."""
        texts, by_anchor = self.texts, self._by_anchor
        found = [i for i in self._few_words if i < limit and texts[i] in query]
        for word in by_anchor.keys() & query.split(" "):
            found.extend(i for i in by_anchor[word] if i < limit and texts[i] in query)
        found.sort()
        return found

    def containing(self, query: str, limit: int) -> list[int]:
        """Positions below ``limit`` of texts that hold ``query`` (non-empty) as a substring, ascending."""
        texts = self.texts
        if self._SEPARATOR in query:  # a match could span two texts: check each
            window = texts[:limit]
            return list(compress(range(len(window)), map(contains, window, repeat(query))))
        if self._joined is None:
            self._joined = self._SEPARATOR.join(texts)
            self._starts = list(accumulate(map((1).__add__, map(len, texts)), initial=0))
        joined, starts = self._joined, self._starts
        found = []
        at = joined.find(query)
        while at != -1:
            i = bisect_right(starts, at) - 1
            if i >= limit:
                break
            found.append(i)
            at = joined.find(query, starts[i + 1])
        return found


class TranscriptTexts:
    """A transcript's collapsed texts, as a list and a set, and (built on first use) a ``Containment`` of
    them and of their token strings.

    Kept across merges (see ``transcript_texts``): every chat turn reconciles the same transcript again,
    one or two rows longer, so the index grows by those rows instead of being built anew.
    """

    def __init__(self, norms: list[str], tokenize: Callable[[str], str], max_chars: int):
        self.tokenize, self.max_chars = tokenize, max_chars
        self.sources: list[Any] | None = None  # what the texts were made from, when that decides them
        self.texts: list[str] = list(norms)
        self.norm_set: set[str] = set(norms)
        self._norms: Containment | None = None
        self._tokens: Containment | None = None
        self._hits: dict[str, tuple[list[int], list[int]]] = {}
        self._positions: dict[str, list[int]] | None = None

    def extend(self, norms: list[str]) -> None:
        if self._positions is not None:
            for i, text in enumerate(norms, len(self.texts)):
                self._positions.setdefault(text, []).append(i)
        self.texts.extend(norms)
        self.norm_set.update(norms)
        if self._norms is not None:
            self._norms.extend(norms)
        if self._tokens is not None:
            self._tokens.extend(self._token_strings(norms))
        self._hits.clear()

    def positions(self, text: str) -> list[int]:
        """Where ``text`` is among the texts, ascending."""
        if self._positions is None:
            self._positions = {}
            for i, known in enumerate(self.texts):
                self._positions.setdefault(known, []).append(i)
        return self._positions.get(text, [])

    def _token_strings(self, norms: list[str]) -> list[str]:
        limit, tokenize = self.max_chars, self.tokenize
        return [tokenize(y) if y and len(y) <= limit else "" for y in norms]

    def fuzzy_hits(self, text: str) -> tuple[list[int], list[int]]:
        """Positions of texts inside ``text`` or holding it, and of token strings likewise, ascending.

        Only texts up to ``max_chars`` long count, and none for a longer ``text``. Answers are kept
        until the texts change: the display and the model context of one turn ask about the same rows.
        """
        hits = self._hits.get(text)
        if hits is None:
            if len(self._hits) >= _HITS_MAX:
                self._hits.clear()
            hits = self._hits[text] = self._find(text)
        return hits

    def _find(self, text: str) -> tuple[list[int], list[int]]:
        if not text or len(text) > self.max_chars:
            return [], []
        everything = len(self.texts)
        if self._norms is None:
            self._norms = Containment()
            self._norms.extend(self.texts)
        norms = self._norms
        by_text = sorted({*norms.inside(text, everything), *norms.containing(text, everything)})
        by_text = [i for i in by_text if len(self.texts[i]) <= self.max_chars]
        token_string = self.tokenize(text)
        if not token_string:
            return by_text, []
        if self._tokens is None:
            self._tokens = Containment()
            self._tokens.extend(self._token_strings(self.texts))
        toks = self._tokens
        return by_text, sorted(
            {*toks.inside(token_string, everything), *toks.containing(token_string, everything)}
        )


_RECENT_TRANSCRIPTS: list[TranscriptTexts] = []  # a cache of a pure function, not state
_RECENT_MAX = 8
_HITS_MAX = 4096


def transcript_texts(
    sources: list[Any],
    tokenize: Callable[[str], str],
    max_chars: int,
    texts_of: Callable[[list[Any]], list[str]] | None = None,
) -> TranscriptTexts:
    """The index of the texts of ``sources`` (``texts_of(sources)``; the sources are the texts when it is
    not given), reusing a recent one whose sources are a prefix of them, or they of it.

    Sources that are strings or ``None`` decide their texts, so comparing them (identity first, at C speed)
    stands in for making the texts again; any other source makes its index one that is never reused. A
    caller looking at a prefix of an index's texts passes ``len(sources)`` as the ``limit`` of its queries.
    """
    make = texts_of or list
    for k, entry in enumerate(_RECENT_TRANSCRIPTS):
        known = entry.sources
        if known is None or entry.tokenize is not tokenize or entry.max_chars != max_chars:
            continue
        if len(known) == len(sources):  # compared whole: no copy of either
            if sources != known:
                continue
        elif len(known) < len(sources) and sources[: len(known)] == known:
            fresh = sources[len(known) :]
            entry.extend(make(fresh))
            entry.sources = known + fresh if _decisive(fresh) else None
        elif not (len(known) > len(sources) and known[: len(sources)] == sources):
            continue
        if k:
            del _RECENT_TRANSCRIPTS[k]
            _RECENT_TRANSCRIPTS.insert(0, entry)
        return entry
    entry = TranscriptTexts(make(sources), tokenize, max_chars)
    entry.sources = list(sources) if _decisive(sources) else None
    _RECENT_TRANSCRIPTS.insert(0, entry)
    del _RECENT_TRANSCRIPTS[_RECENT_MAX:]
    return entry


def _decisive(sources: list[Any]) -> bool:
    """Equal sources have equal texts: every source is a string or ``None``."""
    return set(map(type, sources)) <= _DECISIVE_TYPES


_DECISIVE_TYPES = frozenset({str, type(None)})

"""Fast lookups for the append-only merge (``api.reconcile``) and the context delta (``api.context_view``).

The indexes group registered rows (transcript rows plus the state rows a merge has added so far) by
one fact and load the transcript side only when a lookup could hit it; ``_raw_prefix`` finds the
leading run where two row lists agree on raw content and role, column-wise at C speed.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import compress, repeat
from operator import contains, eq, is_not, not_
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from api.reconcile import _Merge


class _Index:
    """Handles grouped by one fact: local rows (loaded only when a lookup could hit one) and a growing
    list of state rows (those the merge registered, unless another list is given)."""

    def __init__(self, merge: _Merge, fact: str, state_rows: list[int] | None = None):
        self.merge, self.fact = merge, fact
        self.state_rows = merge.registered_state if state_rows is None else state_rows
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
        registered = self.state_rows
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


class Containment:
    """Which texts of a growing list contain a query, or lie inside it, found without scanning them all.

    Texts and queries are words separated by single spaces (collapsed text, token strings). When one such
    text lies inside another, its middle words (all but the first and last, which may be cut) are whole
    words of the other. So texts are indexed by their middle words, and only texts of one or two words
    need a direct check. Every position returned has been checked with ``in``.
    """

    def __init__(self) -> None:
        self.texts: list[str] = []
        self._by_word: dict[str, list[int]] = {}  # each middle word -> texts holding it
        self._by_anchor: dict[str, list[int]] = {}  # each text's longest middle word -> texts
        self._few_words: list[int] = []  # non-empty texts with no middle word

    def extend(self, texts: list[str]) -> None:
        by_word, by_anchor = self._by_word, self._by_anchor
        for i, text in enumerate(texts, len(self.texts)):
            if not text:
                continue
            middle = text.split(" ")[1:-1]
            if not middle:
                self._few_words.append(i)
                continue
            by_anchor.setdefault(max(middle, key=len), []).append(i)
            for word in set(middle):
                by_word.setdefault(word, []).append(i)
        self.texts.extend(texts)

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
        middle = set(query.split(" ")[1:-1])
        texts, by_word = self.texts, self._by_word
        if middle:
            if not middle <= by_word.keys():
                return []  # a middle word no text holds
            candidates = min(map(by_word.__getitem__, middle), key=len)
            return [i for i in candidates if i < limit and query in texts[i]]
        window = texts[:limit]
        return list(compress(range(len(window)), map(contains, window, repeat(query))))


class TranscriptTexts:
    """A transcript's collapsed texts, as a list and a set, and (built on first use) a ``Containment`` of
    them and of their token strings.

    Kept across merges (see ``transcript_texts``): every chat turn reconciles the same transcript again,
    one or two rows longer, so the index grows by those rows instead of being built anew.
    """

    def __init__(self, norms: list[str], tokenize: Callable[[str], str], max_chars: int):
        self.tokenize, self.max_chars = tokenize, max_chars
        self.texts: list[str] = list(norms)
        self.norm_set: set[str] = set(norms)
        self._norms: Containment | None = None
        self._tokens: Containment | None = None
        self._hits: dict[str, tuple[list[int], list[int]]] = {}

    def extend(self, norms: list[str]) -> None:
        self.texts.extend(norms)
        self.norm_set.update(norms)
        if self._norms is not None:
            self._norms.extend(norms)
        if self._tokens is not None:
            self._tokens.extend(self._token_strings(norms))
        self._hits.clear()

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


_RECENT_TRANSCRIPTS: list[TranscriptTexts] = []
_RECENT_MAX = 8
_HITS_MAX = 4096


def transcript_texts(norms: list[str], tokenize: Callable[[str], str], max_chars: int) -> TranscriptTexts:
    """The index of these texts, reusing a recent one whose texts are a prefix of them, or they of it.

    A caller looking at a prefix of an index's texts passes ``len(norms)`` as the ``limit`` of its queries.
    """
    for k, entry in enumerate(_RECENT_TRANSCRIPTS):
        if entry.tokenize is not tokenize or entry.max_chars != max_chars:
            continue
        known = entry.texts
        if len(known) <= len(norms) and norms[: len(known)] == known:
            if len(known) < len(norms):
                entry.extend(norms[len(known) :])
        elif not (len(known) > len(norms) and known[: len(norms)] == norms):
            continue
        del _RECENT_TRANSCRIPTS[k]
        _RECENT_TRANSCRIPTS.insert(0, entry)
        return entry
    entry = TranscriptTexts(norms, tokenize, max_chars)
    _RECENT_TRANSCRIPTS.insert(0, entry)
    del _RECENT_TRANSCRIPTS[_RECENT_MAX:]
    return entry

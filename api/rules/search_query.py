"""A person's search text as a safe full-text query, and a snippet with its matches marked (pure).

The person types words, ``"a phrase"``, ``-excluded`` words and ``prefix*``; everything else (FTS5's own
``NEAR``, ``AND``, column filters, parentheses, stray quotes) is read as plain words. Every term reaches
FTS5 as a quoted string, so no text of the person's is ever read as query syntax.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass

# What FTS5's unicode61 tokenizer keeps together: letters, digits, marks (and the private-use area).
_WORD = re.compile(r"[^\W_]+", re.UNICODE)
# The person's syntax: a quoted phrase (closed or running to the end), or a run of non-space characters.
_PIECE = re.compile(r'(-?)"([^"]*)"?|(\S+)')
# Private markers FTS5's snippet() puts around a match; indexed text never holds them.
MARK_OPEN, MARK_CLOSE = "\x02", "\x03"
MAX_TERMS = 16


# The ranges the agent's own state.db treats as CJK (hermes_state._is_cjk_codepoint).
_CJK = re.compile(
    "[\u4e00-\u9fff\u3400-\u4dbf\U00020000-\U0002a6df\u3000-\u303f\u3040-\u309f\u30a0-\u30ff\uac00-\ud7af]"
)


def has_cjk(text: str) -> bool:
    """True when ``text`` holds a Chinese, Japanese or Korean character (the trigram index's rows)."""
    return _CJK.search(text) is not None


def indexable(text: str) -> str:
    """``text`` as the index stores it: the snippet markers cannot occur in it."""
    return text.replace(MARK_OPEN, " ").replace(MARK_CLOSE, " ")


@dataclass(frozen=True)
class Term:
    words: tuple[str, ...]  # lowercase tokens; several for a phrase
    text: str  # the term as typed (a phrase's inside), for substring matching in the trigram index
    prefix: bool = False
    negated: bool = False


@dataclass(frozen=True)
class Query:
    terms: tuple[Term, ...]

    @property
    def wanted(self) -> tuple[Term, ...]:
        return tuple(t for t in self.terms if not t.negated)

    @property
    def excluded(self) -> tuple[Term, ...]:
        return tuple(t for t in self.terms if t.negated)

    @property
    def cjk(self) -> bool:
        return any(has_cjk(t.text) for t in self.wanted)

    def words(self) -> list[str]:
        """The words a match holds (for marking the snippets the index does not make)."""
        return [t.text.lower() for t in self.wanted if t.text]


def parse(text: str) -> Query:
    """The terms of ``text``; a term with no word in it (punctuation only) is dropped."""
    terms: list[Term] = []
    for match in _PIECE.finditer(text):
        minus, phrase, bare = match.group(1), match.group(2), match.group(3)
        if bare is not None:
            negated = bare.startswith("-") and len(bare) > 1
            body = bare[1:] if negated else bare
            prefix = body.endswith("*")
            body = body.rstrip("*")
        else:
            negated, prefix, body = bool(minus), False, phrase or ""
        words = tuple(w.lower() for w in _WORD.findall(body))
        if words:
            terms.append(Term(words, " ".join(body.split()), prefix and len(words) == 1, negated))
        if len(terms) >= MAX_TERMS:
            break
    return Query(tuple(terms))


def _quoted(words: tuple[str, ...] | list[str]) -> str:
    return '"' + " ".join(words).replace('"', '""') + '"'


def word_match(query: Query) -> str | None:
    """The MATCH expression for the unicode61 table: every wanted term, none of the excluded ones."""
    wanted = [_quoted(t.words) + ("*" if t.prefix else "") for t in query.wanted]
    if not wanted:
        return None
    expr = " AND ".join(wanted)
    for term in query.excluded:
        expr = f"({expr}) NOT {_quoted(term.words)}" + ("*" if term.prefix else "")
    return expr


def trigram_parts(query: Query) -> tuple[str | None, list[str]]:
    """For the trigram table: the MATCH of the wanted terms three characters or longer, and the shorter
    ones, which only a substring test can find (a trigram index needs three characters)."""
    long = [t.text for t in query.wanted if len(t.text) >= 3]
    short = [t.text.lower() for t in query.wanted if 0 < len(t.text) < 3]
    expr = " AND ".join(_quoted([text]) for text in long) if long else None
    return expr, short


def marked_html(snippet: str) -> str:
    """A snippet FTS5 marked with the private markers as HTML: every character escaped, each match in
    ``<mark>``."""
    escaped = html.escape(snippet, quote=True)
    return escaped.replace(MARK_OPEN, "<mark>").replace(MARK_CLOSE, "</mark>")


def mark_words(snippet: str, words: list[str]) -> str:
    """``snippet`` with each case-insensitive occurrence of ``words`` between the private markers (for
    snippets the index does not mark: the trigram rows)."""
    needles = sorted({w for w in words if w}, key=len, reverse=True)
    if not needles:
        return snippet
    pattern = re.compile("|".join(re.escape(w) for w in needles), re.IGNORECASE)
    return pattern.sub(lambda m: MARK_OPEN + m.group(0) + MARK_CLOSE, snippet)


def snippet_around(text: str, words: list[str], before: int = 40, after: int = 100) -> str | None:
    """A window of ``text`` around the first of ``words`` it holds (case-insensitive), whitespace collapsed,
    the words marked; None when it holds none."""
    lowered = text.lower()
    positions = [p for p in (lowered.find(w) for w in words if w) if p >= 0]
    if not positions or len(lowered) != len(text):
        return None
    pos = min(positions)
    start, end = max(0, pos - before), min(len(text), pos + after)
    body = " ".join(text[start:end].split())
    return mark_words(("…" if start else "") + body + ("…" if end < len(text) else ""), words)


def plain(snippet: str) -> str:
    """A marked snippet without its markers."""
    return snippet.replace(MARK_OPEN, "").replace(MARK_CLOSE, "")

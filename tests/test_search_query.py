"""The person's search text as a safe FTS5 query, and marked snippets (pure)."""

from __future__ import annotations

import sqlite3

from hypothesis import given, settings
from hypothesis import strategies as st

from api.rules import search_query
from api.rules.search_query import MARK_CLOSE, MARK_OPEN


def test_words_phrases_exclusions_and_prefixes_become_quoted_terms():
    query = search_query.parse('alpha "two words" -gamma bet*')
    assert search_query.word_match(query) == '("alpha" AND "two words" AND "bet"*) NOT "gamma"'


def test_fts_syntax_typed_by_a_person_is_read_as_words():
    for text in ("NEAR(a b)", "body:secret", "a OR b", "^x", '"unclosed', "(((", "x'); DROP TABLE t; --"):
        expr = search_query.word_match(search_query.parse(text))
        assert expr is None or all(part.startswith(("(", '"')) for part in expr.split(" AND "))


def test_only_exclusions_or_only_punctuation_ask_for_nothing():
    assert search_query.word_match(search_query.parse("-alpha")) is None
    assert search_query.word_match(search_query.parse('" * - ()')) is None


@settings(deadline=None)  # a loaded machine is no reason to fail
@given(st.text(max_size=200))
def test_any_text_makes_a_query_fts5_accepts(text):
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE t USING fts5(body)")
    conn.execute("INSERT INTO t VALUES ('some words here')")
    expr = search_query.word_match(search_query.parse(text))
    if expr is not None:
        conn.execute("SELECT * FROM t WHERE t MATCH ?", (expr,)).fetchall()


def test_cjk_text_is_told_from_other_scripts():
    assert search_query.has_cjk("東京") and search_query.has_cjk("서울") and search_query.has_cjk("カタカナ")
    assert not search_query.has_cjk("Zürich, Москва")


def test_a_marked_snippet_is_escaped_html_with_only_marks_as_tags():
    snippet = f"a <b>&{MARK_OPEN}word{MARK_CLOSE}\"'"
    assert search_query.marked_html(snippet) == "a &lt;b&gt;&amp;<mark>word</mark>&quot;&#x27;"
    assert search_query.plain(snippet) == "a <b>&word\"'"


def test_the_index_never_stores_the_markers():
    assert MARK_OPEN not in search_query.indexable(f"x{MARK_OPEN}y{MARK_CLOSE}")


def test_a_snippet_around_the_first_word_found_marks_every_word():
    text = "x " * 60 + "Tokyo and then kyoto"
    marked = search_query.snippet_around(text, ["kyoto", "tokyo"])
    assert marked is not None and marked.startswith("…")
    assert f"{MARK_OPEN}Tokyo{MARK_CLOSE}" in marked and f"{MARK_OPEN}kyoto{MARK_CLOSE}" in marked
    assert search_query.snippet_around("nothing here", ["kyoto"]) is None

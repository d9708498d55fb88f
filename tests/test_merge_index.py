"""The merge's lookups: the containment index answers like a scan of every text."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from api.rules.merge_index import Containment, transcript_texts
from api.rules.message_keys import tokens

_WORDS = st.sampled_from(["a", "ab", "b", "ok", "the", "cat", "sat", "é", "x-y", "a\x00b"])
_TEXT = st.lists(_WORDS, max_size=6).map(" ".join)


@settings(max_examples=300, deadline=None)
@given(st.lists(_TEXT, max_size=12), _TEXT, st.integers(0, 12))
def test_containment_finds_exactly_the_texts_a_scan_finds(texts, query, limit):
    index = Containment()
    index.extend(texts[:5])
    index.extend(texts[5:])  # grown in two steps, as a transcript grows between turns
    assert index.inside(query, limit) == [i for i, y in enumerate(texts[:limit]) if y and y in query]
    if query:
        assert index.containing(query, limit) == [i for i, y in enumerate(texts[:limit]) if query in y]


def test_fuzzy_hits_ignore_texts_over_the_size_bound():
    texts = transcript_texts(["cat sat on the mat", "x " * 50 + "cat sat"], tokens, 40)
    assert texts.fuzzy_hits("cat sat") == ([0], [0])
    assert texts.fuzzy_hits("x " * 30) == ([], [])


def test_a_longer_transcript_reuses_the_index_of_its_prefix():
    first = transcript_texts(["one two three", "four five six"], tokens, 1000)
    assert first.fuzzy_hits("seven") == ([], [])
    grown = transcript_texts(["one two three", "four five six", "seven eight"], tokens, 1000)
    assert grown is first
    assert grown.fuzzy_hits("seven") == ([2], [2])


def test_an_index_answers_for_the_texts_asked_about_not_for_older_ones_of_the_same_length():
    transcript_texts(["one two three", "four five six"], tokens, 1000)
    edited = transcript_texts(["one two three", "seven eight"], tokens, 1000)
    assert edited.texts == ["one two three", "seven eight"]
    assert edited.fuzzy_hits("seven eight") == ([1], [1])


def test_an_index_made_from_contents_is_reused_only_while_the_contents_match():
    def norms(contents):
        return [" ".join(str(c).split()) for c in contents]

    first = transcript_texts(["a  b", "c"], tokens, 1000, norms)
    assert transcript_texts(["a  b", "c", "d  e"], tokens, 1000, norms) is first
    assert first.texts == ["a b", "c", "d e"]
    other = transcript_texts(["a  b", "x"], tokens, 1000, norms)
    assert other is not first and other.texts == ["a b", "x"]


def test_positions_name_every_place_of_a_text_as_the_index_grows():
    texts = transcript_texts(["", "alpha", "", "beta gamma"], tokens, 1000)
    assert texts.positions("") == [0, 2]
    texts.extend(["", "alpha"])
    assert texts.positions("") == [0, 2, 4]
    assert texts.positions("alpha") == [1, 5]
    assert texts.positions("delta") == []

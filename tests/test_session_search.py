"""Search over every session: the index once it caught up, the files until then (with the progress)."""

from __future__ import annotations

import pytest

from api.rules.errors import BadRequest
from api.services import search_indexer, session_search
from talaria_testing.sessions import saved_session
from talaria_testing.transcripts import conversation


@pytest.fixture
def indexer(state_dir):
    indexing = search_indexer.Indexing()
    made = indexing.indexer = search_indexer.Indexer(state_dir, state_dir.parent / "search.db")
    previous = search_indexer.INDEXING.use(indexing)
    yield made
    made.stop()
    search_indexer.INDEXING.use(previous)


def _session(title: str, *texts: str, **fields):
    session = saved_session(title=title, **fields)
    session.messages = conversation(*texts, start=1000.0)
    session.save()
    return session


def test_until_the_index_caught_up_the_files_answer_and_the_progress_is_said(indexer):
    sid = _session("a", "the lemur sleeps", "ok", model="m1").session_id
    answer = session_search.search_sessions({"q": "lemur", "content": "1"})  # the thread has not started
    assert answer["index"]["state"] == "rebuilding" and answer["index"]["progress"] == 0.0
    assert [row["session_id"] for row in answer["sessions"]] == [sid]
    assert answer["sessions"][0]["match"]["snippet_html"] == "the <mark>lemur</mark> sleeps"
    assert session_search.search_sessions({"q": "lemur", "content": "1", "model": "m2"})["sessions"] == []
    indexer.start()
    assert indexer.wait_idle()
    answer = session_search.search_sessions({"q": "lemur", "content": "1"})
    assert answer["index"]["state"] == "ready" and [row["session_id"] for row in answer["sessions"]] == [sid]


def test_titles_come_first_once_then_messages_by_rank(indexer):
    titled = _session("lemur facts", "nothing here", "ok").session_id
    found = _session("zoo", "a lemur", "a lemur lemur").session_id
    indexer.start()
    assert indexer.wait_idle()
    rows = session_search.search_sessions({"q": "lemur", "content": "1"})["sessions"]
    assert [row["session_id"] for row in rows] == [titled, found]
    assert "match" not in rows[0] and rows[1]["match"]["message_idx"] in (0, 1)
    later = session_search.search_sessions({"q": "lemur", "content": "1", "offset": "1"})["sessions"]
    assert later == []  # the title row is on the first page only, and the one message hit was there


@pytest.mark.parametrize(
    "params",
    [{"q": 5}, {"offset": "-1"}, {"limit": "0"}, {"limit": "x"}, {"after": "soon"}, {"source": "s" * 2000}],
)
def test_bad_parameters_are_refused(indexer, params):
    with pytest.raises(BadRequest):
        session_search.search_sessions({"q": "x", "content": "1", **params})

"""The sidebar's change feed: numbered changes per session, forgetting, and the SSE relay."""

from __future__ import annotations

import io
import threading
import time

from api.services import session_catalogue
from api.services.session_feed import ChangeLog
from api.store.models import Session
from api.web.sse import serve_session_changes


def _row(sid: str, title: str = "t") -> dict:
    return {"session_id": sid, "title": title, "composer_draft": "not for the sidebar"}


def test_since_gives_the_newest_change_per_session():
    log = ChangeLog()
    log.record("a", _row("a", "first"))
    log.record("b", _row("b"))
    log.record("a", _row("a", "second"))
    log.record("b", None)
    seq, delta = log.since(0)
    assert seq == 4
    assert [r["title"] for r in delta["upsert"]] == ["second"] and delta["remove"] == ["b"]
    assert "composer_draft" not in delta["upsert"][0]
    assert log.since(3) == (4, {"upsert": [], "remove": ["b"]})
    assert log.since(4) == (4, {"upsert": [], "remove": []})


def test_a_follower_behind_the_history_or_ahead_of_it_must_reload():
    log = ChangeLog(history=2)
    for sid in "abc":
        log.record(sid, _row(sid))
    assert log.since(0)[1] is None  # "a" was forgotten
    assert log.since(1)[1] == {"upsert": [_row_of(log, "c"), _row_of(log, "b")], "remove": []}
    assert log.since(99)[1] is None  # numbers from another server run
    log.reset()
    assert log.since(3)[1] is None and log.since(log.seq)[1] == {"upsert": [], "remove": []}


def _row_of(log: ChangeLog, sid: str) -> dict:
    return log._changes[sid][1]


class _Handler:
    def __init__(self):
        self.wfile = io.BytesIO()
        self.headers_sent: list[tuple[str, str]] = []

    def send_response(self, status):
        self.status = status

    def send_header(self, key, value):
        self.headers_sent.append((key, value))

    def end_headers(self):
        pass


def test_serve_relays_changes_then_ends_when_the_log_closes():
    log = ChangeLog()
    log.record("a", _row("a"))
    handler = _Handler()
    relay = threading.Thread(target=serve_session_changes, args=(handler, log, 1, 0.05))
    relay.start()
    log.record("b", None)
    deadline = time.monotonic() + 5
    while b"event: sessions" not in handler.wfile.getvalue() and time.monotonic() < deadline:
        time.sleep(0.01)
    log.close()
    relay.join(5)
    assert not relay.is_alive()
    text = handler.wfile.getvalue().decode()
    assert 'id: 2\nevent: sessions\ndata: {"upsert":[],"remove":["b"]}' in text
    assert ("X-Content-Type-Options", "nosniff") in handler.headers_sent


def test_saves_renames_and_deletes_reach_the_log(app):
    start = app.feed.seq
    session = Session(title="fed")
    session.save()
    session_catalogue.rename_session(session.session_id, "renamed")
    session_catalogue.delete_session(session.session_id)
    seq, delta = app.feed.since(start)
    assert seq >= start + 3
    assert delta["remove"] == [session.session_id] and delta["upsert"] == []


def test_numbers_from_an_earlier_run_of_the_server_mean_reload():
    earlier = ChangeLog(start=1_000)
    earlier.record("a", _row("a"))
    later = ChangeLog(start=2_000)
    assert later.since(earlier.seq)[1] is None
    assert later.since(later.seq)[1] == {"upsert": [], "remove": []}


def test_the_agent_sessions_list_is_given_to_a_follower_behind_its_change_only():
    log = ChangeLog(start=10)
    assert log.agent_sessions_since(10) is None
    log.record_agent_sessions([{"id": "cli1"}])
    assert log.seq == 11 and log.agent_sessions_since(10) == [{"id": "cli1"}]
    assert log.agent_sessions_since(11) is None
    log.record_agent_sessions([])
    assert log.agent_sessions_since(11) == []

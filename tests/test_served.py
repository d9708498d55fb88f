"""Each request is served by its server's app: two apps served at once by two real servers in one process keep
their own turns, jobs and feed; a route handler called outside a server is served by what is in use."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request

import pytest

from api.agent import approvals, turn_journal
from api.agent.turn_journal import Turn
from api.server import app_server
from api.server.app import App
from api.services import compression, session_feed
from api.store import models
from api.store import session_store as store
from api.web import routes_control
from api.web.served import InUseApp, app_of


def _get(port, path):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as reply:
            return reply.status, reply.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


@pytest.fixture
def two_served(tmp_path):
    """Two apps, each on its own store, each served by its own server; the second built last (in use)."""
    previous = store.in_use()
    apps, servers = [], []
    try:
        for name in ("one", "two"):
            folder = tmp_path / name
            folder.mkdir()
            app = App(store=store.Store(folder, models.Session))
            apps.append(app)
            server = app_server.make_server(app, "127.0.0.1", 0, threads=2)
            servers.append(server)
            threading.Thread(target=server.serve_forever, name=f"served-{name}", daemon=True).start()
        yield list(zip(apps, (server.server_address[1] for server in servers), strict=True))
    finally:
        for server in servers:
            server.shutdown()
            server.server_close()
        for app in reversed(apps):
            app.close()
            app.release()
        store.use(previous)


def _finished_turn(stream_id):
    turn = Turn(stream_id, "s1", "hello", time.time())
    turn.append("done", {"session": None})
    return turn


def test_two_servers_in_one_process_serve_their_own_apps_turns_jobs_and_feed(two_served):
    (first, first_port), (second, second_port) = two_served
    turn = _finished_turn("a" * 32)
    first.turns.start(turn)
    first.turns.end(turn)
    turn.finish()
    status, body = _get(first_port, f"/api/chat/stream?stream_id={turn.stream_id}")
    assert status == 200 and b"event: done" in body
    assert (
        _get(second_port, f"/api/chat/stream?stream_id={turn.stream_id}")[0] == 404
    )  # not the second's turn

    first.jobs._jobs["s1"] = {"status": "done", "started_at": 1.0, "finished_at": time.time()}  # noqa: SLF001
    assert json.loads(_get(first_port, "/api/session/compress/status?session_id=s1")[1])["status"] == "done"
    assert json.loads(_get(second_port, "/api/session/compress/status?session_id=s1")[1])["status"] == "idle"

    before = [json.loads(_get(port, "/api/sessions")[1])["feed_seq"] for port in (first_port, second_port)]
    first.feed.record("s1", None)
    first.feed.record("s2", None)
    after = [json.loads(_get(port, "/api/sessions")[1])["feed_seq"] for port in (first_port, second_port)]
    assert after == [before[0] + 2, before[1]]


class _Bare:
    """A handler outside any server, as hermes-webui's tests call route handlers."""

    def __init__(self):
        self.answers = []


def test_a_handler_outside_a_server_is_served_by_what_is_in_use(app, monkeypatch):
    served = app_of(_Bare())
    assert isinstance(served, InUseApp) and served.auth is None and served.startup_recovery is None
    assert served.turns is turn_journal.TURNS.get() is app.turns
    assert served.jobs is compression.JOBS.get() is app.jobs and served.feed is session_feed.changes()
    assert served.store is models.store() is app.store and served.approvals is app.approvals
    with pytest.raises(AttributeError):
        _ = served.no_such_part

    answered = []
    monkeypatch.setattr(routes_control, "j", lambda handler, payload: answered.append(payload))
    monkeypatch.setattr(approvals.session_lookup, "load_session", lambda sid: None)
    routes_control._handle_approval_yolo(_Bare(), {"session_id": "s1", "enabled": True})  # noqa: SLF001
    assert answered[-1]["yolo"] is True and "s1" in app.yolo  # the app in use's switches

"""The route table and its thin handlers, in process with a fake handler (the real server is in integration/)."""

from __future__ import annotations

import io
import json
import re
import types
from pathlib import Path

import pytest

from api.rules.errors import Conflict
from api.server.app import App
from api.services import compression
from api.store.models import Session
from api.web import routes
from api.web.auth import AuthManager
from talaria_testing.sidebar_cost import bytes_allocated, index_many_sessions, touch_row

HTTP_API = Path(__file__).resolve().parents[1] / "docs" / "http-api.md"
DOCUMENTED_ROW = re.compile(r"^\| (GET|POST) (/[^ |]*) \|", re.MULTILINE)


def documented_routes() -> set[tuple[str, str]]:
    """The rows of docs/http-api.md's route tables (the page, ``GET /``, and its service worker,
    ``GET /sw.js``, are served beside the table, with the static files)."""
    rows = set(DOCUMENTED_ROW.findall(HTTP_API.read_text(encoding="utf-8")))
    return rows - {("GET", "/"), ("GET", "/sw.js")}


class FakeHandler:
    def __init__(self, headers: dict | None = None, body: bytes = b"", app: App | None = None):
        self.server = types.SimpleNamespace(app=app)  # a real server holds the app its routes serve
        self.wfile = io.BytesIO()
        self.rfile = io.BytesIO(body)
        self.status = None
        self.sent: dict[str, str] = {}
        self.headers = headers or {}
        self.client_address = ("127.0.0.1", 5555)

    def send_response(self, status):
        self.status = status

    def send_header(self, key, value):
        self.sent[key] = value

    def end_headers(self):
        pass

    def payload(self):
        return json.loads(self.wfile.getvalue())


@pytest.fixture
def no_auth(app):
    """The routes served by an app with login off."""
    return app


def _call(
    method: str, path: str, data: dict | None = None, headers: dict | None = None, *, app: App | None = None
) -> FakeHandler:
    handler = FakeHandler(headers, app=app)
    query = data if method == "GET" else {}
    routes.dispatch(handler, method, path, query or {}, None if method == "GET" else (data or {}))
    return handler


def test_the_table_holds_exactly_the_documented_routes():
    assert set(routes.ROUTES) == documented_routes()


def test_unknown_path_is_a_json_404(no_auth):
    handler = _call("GET", "/api/nope")
    assert (handler.status, handler.payload()) == (404, {"error": "Not found"})


def test_wrong_method_is_405_with_allow(no_auth):
    handler = _call("POST", "/api/sessions")
    assert handler.status == 405 and handler.sent["Allow"] == "GET"


# ---------------------------------------------------------------------- manual compress validation


def compress_with(monkeypatch, manual_compress, body: dict) -> FakeHandler:
    """The compress route's answer to ``body`` when ``api.services.compression.manual_compress`` is the given one."""
    monkeypatch.setattr(compression, "manual_compress", manual_compress)
    handler = FakeHandler()
    routes._handle_session_compress(handler, body)
    return handler


@pytest.mark.parametrize(("body", "message"), [
    ({}, "Missing required field(s): session_id"),
    ({"session_id": ""}, "Missing required field(s): session_id"),
    ({"session_id": None}, "Missing required field(s): session_id"),
    ({"session_id": "   "}, "session_id is required"),
    ({"session_id": "../../etc/passwd"}, "Invalid session_id"),
    ({"session_id": 7}, "Invalid session_id"),
])  # fmt: skip
def test_compress_validates_session_id_first(body, message, monkeypatch):
    handler = compress_with(monkeypatch, lambda *a: pytest.fail("must not be called"), body)
    assert (handler.status, handler.payload()) == (400, {"error": message})


def test_compress_passes_the_result_and_the_topic_through(monkeypatch):
    calls = []

    def fake(sid, focus, **parts):  # parts: the app's store, live turns and workers
        calls.append((sid, focus))
        return {"ok": True, "session": {"session_id": sid}, "summary": {}, "focus_topic": focus}

    handler = compress_with(monkeypatch, fake, {"session_id": " abc ", "topic": "  " + "f" * 600})
    assert handler.status == 200 and handler.payload()["ok"] is True
    assert calls == [("abc", "  " + "f" * 600)]  # api.services.compression strips and cuts it


def failing(exc: Exception):
    def manual_compress(sid, focus, **parts):
        raise exc

    return manual_compress


def test_compress_api_errors_keep_their_status(monkeypatch):
    conflict = Conflict("Session is still streaming; wait for the current turn to finish.")
    assert compress_with(monkeypatch, failing(conflict), {"session_id": "abc"}).status == 409


def test_compress_other_failures_are_400_with_paths_scrubbed(monkeypatch):
    handler = compress_with(
        monkeypatch, failing(OSError("cannot read /home/alice/.hermes/config.yaml")), {"session_id": "abc"}
    )
    assert handler.status == 400
    assert handler.payload() == {"error": "Compression failed: cannot read <path>"}


# ---------------------------------------------------------------------- history edits


def test_retry_with_nothing_to_retry_is_200_with_an_error(state_dir, no_auth):
    session = Session(title="t", messages=[])
    session.save()
    handler = _call("POST", "/api/session/retry", {"session_id": session.session_id})
    assert (handler.status, handler.payload()) == (200, {"error": "No previous message to retry."})


def test_undo_answers_ok_with_the_full_session(state_dir, no_auth, monkeypatch):
    session = Session(
        title="t",
        messages=[
            {"role": "user", "content": "a", "timestamp": 1.0},
            {"role": "assistant", "content": "b", "timestamp": 2.0},
        ],
    )
    session.save()
    handler = _call("POST", "/api/session/undo", {"session_id": session.session_id})
    data = handler.payload()
    assert handler.status == 200 and data["ok"] is True and data["removed_count"] == 2
    assert data["session"]["messages"] == [] and data["session"]["total_messages"] == 0


@pytest.mark.parametrize("keep", [-1, "2", 1.5, True, None])
def test_truncate_needs_a_non_negative_integer(state_dir, no_auth, keep):
    session = Session(session_id="abc", messages=[{"role": "user", "content": "x", "timestamp": 1.0}] * 3)
    session.save()
    before = session.path.read_bytes()
    handler = _call("POST", "/api/session/truncate", {"session_id": "abc", "keep_count": keep})
    assert handler.status == 400
    assert session.path.read_bytes() == before


# ---------------------------------------------------------------------- auth


@pytest.fixture
def auth_on(app):
    """The routes served by an app with login on."""
    app.auth = AuthManager("correct horse", b"k" * 32)
    return app


def _login(app: App) -> tuple[str, str]:
    assert app.auth is not None
    return app.auth.login("correct horse", "127.0.0.1")


def test_auth_requires_a_cookie_except_on_public_routes(auth_on):
    assert _call("GET", "/api/sessions", app=auth_on).status == 401
    assert _call("GET", "/health", app=auth_on).status == 200
    assert _call("GET", "/api/auth/status", app=auth_on).payload() == {
        "enabled": True,
        "logged_in": False,
        "csrf_token": None,
    }


def test_a_forged_cookie_is_401(auth_on):
    cookie, _ = _login(auth_on)
    body, _, sig = cookie.rpartition(".")
    forged = f"{body}.{'A' * len(sig)}"
    assert (
        _call("GET", "/api/sessions", headers={"Cookie": f"talaria_session={forged}"}, app=auth_on).status
        == 401
    )


def test_posts_need_the_csrf_token(auth_on):
    cookie, csrf = _login(auth_on)
    headers = {"Cookie": f"talaria_session={cookie}"}
    assert _call("GET", "/api/sessions", headers=headers, app=auth_on).status == 200
    assert _call("POST", "/api/session/new", {}, headers=headers, app=auth_on).status == 403
    assert (
        _call(
            "POST", "/api/session/new", {}, headers={**headers, "X-CSRF-Token": "wrong"}, app=auth_on
        ).status
        == 403
    )
    assert (
        _call("POST", "/api/session/new", {}, headers={**headers, "X-CSRF-Token": csrf}, app=auth_on).status
        == 200
    )


def test_login_sets_an_http_only_cookie_and_returns_the_csrf_token(auth_on):
    handler = _call("POST", "/api/auth/login", {"password": "correct horse"}, app=auth_on)
    assert handler.status == 200 and handler.payload()["csrf_token"]
    assert "HttpOnly" in handler.sent["Set-Cookie"] and "SameSite=Strict" in handler.sent["Set-Cookie"]
    assert _call("POST", "/api/auth/login", {"password": "nope"}, app=auth_on).status == 401


def test_auth_status_without_auth_says_logged_in(no_auth):
    assert _call("GET", "/api/auth/status").payload() == {"enabled": False, "logged_in": True}


def test_startup_summary_is_served(app):
    app.startup_recovery = {"scanned": 3, "restored": 1, "details": [], "interrupted_turns": []}
    assert _call("GET", "/api/recovery/startup", app=app).payload()["scanned"] == 3
    assert _call("GET", "/health", app=app).payload()["recovery"]["restored"] == 1


def test_health_costs_the_same_however_many_sessions_are_stored(state_dir, no_auth):
    """/health counted the sessions by copying every sidebar row (re-sorted after each save of a streaming
    turn): a liveness probe cost O(sessions). It reads the index's count."""
    sids = index_many_sessions(state_dir, 3000)
    _call("GET", "/health")
    touch_row(state_dir, sids[0])
    handler = None

    def health() -> None:
        nonlocal handler
        handler = _call("GET", "/health")

    assert bytes_allocated(health) < 50_000  # copying the 3,000 rows alone takes megabytes
    assert handler is not None and handler.payload()["sessions"] == 3000

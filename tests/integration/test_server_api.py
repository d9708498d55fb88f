"""The real server as a subprocess on 127.0.0.1: every non-chat route over HTTP, its errors, and auth."""

from __future__ import annotations

import json
import os
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from talaria_testing.server_proc import ServerProc
from talaria_testing.transcripts import conversation

pytestmark = pytest.mark.integration

BODY_LIMIT = 256 * 1024


def _files_outside_state(srv: ServerProc) -> set[str]:
    out = set()
    for path in srv.root.rglob("*"):
        if path.is_file() and not path.is_relative_to(srv.state_dir) and path != srv.log_path:
            out.add(str(path.relative_to(srv.root)))
    return out


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    server = ServerProc(tmp_path_factory.mktemp("api"), env={"TALARIA_MAX_BODY_BYTES": str(BODY_LIMIT)})
    server.start()
    yield server
    server.stop()
    assert "unexpected error" not in server.log_text(), server.log_text()[-4000:]


def _msgs(n: int, prefix: str = "message") -> list[dict]:
    return conversation(*(f"{prefix} {i}" for i in range(n)), start=1000.0)


def _import(srv: ServerProc, title: str, messages: list[dict]) -> str:
    return srv.post_json("/api/session/import", {"title": title, "messages": messages})["session"][
        "session_id"
    ]


# ---------------------------------------------------------------------- health and static


def test_health_reports_version_count_and_startup_recovery(srv):
    data = srv.get_json("/health")
    assert data["ok"] is True and isinstance(data["version"], str) and isinstance(data["sessions"], int)
    assert {"scanned", "restored", "details", "interrupted_turns"} <= set(data["recovery"])
    full = srv.get_json("/api/recovery/startup")
    # /health is public even with a login: it carries the counts, never the details (file names).
    assert data["recovery"]["restored"] == full["restored"]
    assert data["recovery"]["details"] == len(full["details"])
    assert str(srv.root) not in json.dumps(data)


def test_the_page_is_served_with_a_strict_csp(srv):
    status, headers, body = srv.request("GET", "/")
    assert status == 200 and headers["content-type"].startswith("text/html")
    assert "script-src 'self'" in headers["content-security-policy"]
    assert headers["x-frame-options"] == "DENY" and headers["x-content-type-options"] == "nosniff"
    assert b"<html" in body


def test_javascript_modules_are_served_as_text_javascript(srv):
    static = Path(__file__).resolve().parents[2] / "static"
    js = sorted(static.rglob("*.js"))
    if not js:
        pytest.skip("the page has no JS modules yet")
    status, headers, _ = srv.request("GET", f"/static/{js[0].relative_to(static).as_posix()}")
    assert status == 200 and headers["content-type"].startswith("text/javascript")


@pytest.mark.parametrize(
    "path",
    [
        "/static/../server.py",
        "/static/%2e%2e/server.py",
        "/static/..%2fserver.py",
        "/static//etc/passwd",
        "/static/.hidden",
        "/etc/passwd",
        "/static/",
    ],
)
def test_static_paths_cannot_escape_the_static_folder(srv, path):
    status, headers, body = srv.request("GET", path)
    assert status == 404 and headers["content-type"].startswith("application/json")
    assert json.loads(body) == {"error": "Not found"}


# ---------------------------------------------------------------------- protocol errors


def test_unknown_api_route_is_a_json_404(srv):
    assert srv.json("GET", "/api/nope") == (404, {"error": "Not found"})
    assert srv.json("POST", "/api/session/nope", {}) == (404, {"error": "Not found"})


def test_wrong_method_is_405(srv):
    status, headers, _ = srv.request("DELETE", "/api/sessions")
    assert status == 405 and headers["allow"] == "GET"


def test_unsupported_http_method_still_answers_json(srv):
    status, headers, body = srv.request("BREW", "/api/sessions")
    assert status == 501 and "error" in json.loads(body)


def test_body_over_the_limit_is_413(srv):
    status, data = srv.json("POST", "/api/session/import", {"messages": [], "pad": "x" * (BODY_LIMIT + 10)})
    assert status == 413 and "too large" in data["error"]


def test_wrong_content_type_is_415(srv):
    status, data = srv.json("POST", "/api/session/new", b'{"title": "x"}', {"Content-Type": "text/plain"})
    assert status == 415 and "error" in data


@pytest.mark.parametrize("raw", [b"{nope", b"\xff\xfe\x00"])
def test_malformed_json_is_400(srv, raw):
    status, data = srv.json("POST", "/api/session/new", raw, {"Content-Type": "application/json"})
    assert status == 400 and data["error"] == "Malformed JSON body"


def test_json_that_is_not_an_object_is_400(srv):
    status, data = srv.json("POST", "/api/session/new", [1, 2])
    assert status == 400 and data["error"] == "JSON body must be an object"


def test_empty_json_post_body_is_an_empty_object(srv):
    status, data = srv.json("POST", "/api/session/new", b"", {"Content-Type": "application/json"})
    assert status == 200 and data["session"]["title"] == "Untitled"


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", None])
def test_empty_post_body_without_the_json_type_is_415_and_creates_nothing(srv, content_type):
    before = srv.get_json("/health")["sessions"]
    headers = {"Content-Type": content_type} if content_type else {}
    status, data = srv.json("POST", "/api/session/new", b"", headers)
    assert status == 415 and "error" in data
    assert srv.get_json("/health")["sessions"] == before


# ---------------------------------------------------------------------- session lifecycle


def test_create_list_get_rename_pin_archive(srv):
    created = srv.post_json("/api/session/new", {"title": "Lifecycle"})["session"]
    sid = created["session_id"]
    assert (srv.state_dir / "sessions" / f"{sid}.json").is_file()
    listing = srv.get_json("/api/sessions")
    assert sid in {r["session_id"] for r in listing["sessions"]} and listing["agent_sessions"] == []
    assert srv.get_json(f"/api/session?session_id={sid}")["session"]["title"] == "Lifecycle"
    assert (
        srv.post_json("/api/session/rename", {"session_id": sid, "title": "Renamed"})["session"]["title"]
        == "Renamed"
    )
    assert srv.post_json("/api/session/pin", {"session_id": sid, "pinned": True})["session"]["pinned"] is True
    assert (
        srv.post_json("/api/session/archive", {"session_id": sid, "archived": True})["session"]["archived"]
        is True
    )
    row = next(r for r in srv.get_json("/api/sessions")["sessions"] if r["session_id"] == sid)
    assert (row["title"], row["pinned"], row["archived"]) == ("Renamed", True, True)


@pytest.mark.parametrize(
    ("path", "body", "status"),
    [
        ("/api/session/rename", {"session_id": "nosuch", "title": "x"}, 404),
        ("/api/session/rename", {"session_id": "../../etc/passwd", "title": "x"}, 400),
        ("/api/session/rename", {"title": "x"}, 400),
        ("/api/session/pin", {"session_id": "nosuch", "pinned": True}, 404),
        ("/api/session/pin", {"session_id": "abc", "pinned": "yes"}, 400),
        ("/api/session/archive", {"session_id": "abc", "archived": 1}, 400),
        ("/api/session/delete", {"session_id": "nosuch"}, 404),
        ("/api/session/delete", {"session_id": ["a"]}, 400),
        ("/api/session/restore-deleted", {"undo_token": "../x-1234567890123"}, 400),
        ("/api/session/restore-deleted", {"undo_token": "nosuch-1234567890123"}, 404),
        ("/api/session/new", {"workspace": "/definitely/not/here"}, 400),
        ("/api/session/new", {"title": 5}, 400),
    ],
)
def test_session_route_errors(srv, path, body, status):
    got, data = srv.json("POST", path, body)
    assert got == status and isinstance(data["error"], str)


@pytest.mark.parametrize(
    ("query", "status"),
    [
        ("", 400),
        ("session_id=nosuch", 404),
        ("session_id=..%2F..%2Fetc%2Fpasswd", 400),
        ("session_id=abc&msg_limit=-1", 400),
        ("session_id=abc&msg_before=x", 400),
    ],
)
def test_get_session_errors(srv, query, status):
    got, data = srv.json("GET", f"/api/session?{query}")
    assert got == status and "error" in data


def test_paging_with_msg_limit_and_msg_before(srv):
    sid = _import(srv, "Paging", _msgs(25))
    page = srv.get_json(f"/api/session?session_id={sid}&msg_limit=10")["session"]
    assert [m["_idx"] for m in page["messages"]] == list(range(15, 25))
    assert page["has_more_before"] is True and page["total_messages"] == 25
    assert page["messages"][0]["html"] == "<p>message 15</p>\n"
    older = srv.get_json(f"/api/session?session_id={sid}&msg_limit=10&msg_before=15")["session"]
    assert [m["_idx"] for m in older["messages"]] == list(range(5, 15))
    oldest = srv.get_json(f"/api/session?session_id={sid}&msg_limit=10&msg_before=5")["session"]
    assert [m["_idx"] for m in oldest["messages"]] == list(range(5)) and oldest["has_more_before"] is False


def test_delete_then_undo(srv):
    sid = _import(srv, "Delete me", _msgs(3))
    result = srv.post_json("/api/session/delete", {"session_id": sid})
    assert result["ok"] is True and result["undo_token"]
    assert not (srv.session_dir / f"{sid}.json").exists()
    assert (srv.state_dir / "trash" / result["undo_token"] / f"{sid}.json").is_file()
    assert sid not in {r["session_id"] for r in srv.get_json("/api/sessions")["sessions"]}
    assert srv.json("GET", f"/api/session?session_id={sid}")[0] == 404
    row = srv.post_json("/api/session/restore-deleted", {"undo_token": result["undo_token"]})["session"]
    assert row["session_id"] == sid and row["message_count"] == 3
    assert srv.get_json(f"/api/session?session_id={sid}")["session"]["total_messages"] == 3
    assert sid in {r["session_id"] for r in srv.get_json("/api/sessions")["sessions"]}


def test_search_by_title_and_by_content(srv):
    sid = _import(
        srv, "Zebra migration notes", [{"role": "user", "content": "Where do wildebeest go in August?"}]
    )
    other = _import(
        srv, "Unrelated", [{"role": "assistant", "content": "The WILDEBEEST cross the Mara river."}]
    )
    by_title = srv.get_json("/api/sessions/search?q=zebra")["sessions"]
    assert [r["session_id"] for r in by_title] == [sid]
    assert srv.get_json("/api/sessions/search?q=wildebeest")["sessions"] == []
    by_content = srv.get_json("/api/sessions/search?q=wildebeest&content=1")["sessions"]
    matches = {r["session_id"]: r["match"] for r in by_content}
    assert set(matches) == {sid, other}
    assert matches[other]["message_idx"] == 0 and "WILDEBEEST cross" in matches[other]["snippet"]


# ---------------------------------------------------------------------- export and import


class _Tags(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


def test_export_formats(srv):
    messages = [
        {"role": "user", "content": "Hello <script>alert(1)</script>"},
        {"role": "assistant", "content": "**Hi**"},
    ]
    sid = _import(srv, "Export me", messages)
    status, headers, body = srv.request("GET", f"/api/session/export?session_id={sid}&format=json")
    assert status == 200 and headers["content-disposition"] == f'attachment; filename="talaria-{sid}.json"'
    assert json.loads(body)["messages"] == messages
    status, headers, body = srv.request("GET", f"/api/session/export?session_id={sid}&format=md")
    assert status == 200 and headers["content-type"].startswith("text/markdown") and b"# Export me" in body
    status, headers, body = srv.request("GET", f"/api/session/export?session_id={sid}&format=html")
    assert status == 200 and headers["content-type"].startswith("text/html")
    assert headers["content-disposition"].startswith("attachment")
    parser = _Tags()
    parser.feed(body.decode())
    assert "script" not in {t for t, _ in parser.tags} and "<strong>Hi</strong>" in body.decode()
    assert srv.json("GET", f"/api/session/export?session_id={sid}&format=exe")[0] == 400
    assert srv.json("GET", "/api/session/export?session_id=nosuch&format=md")[0] == 404


def test_exported_json_imports_as_a_new_session(srv):
    sid = _import(srv, "Round trip", _msgs(4))
    _, _, body = srv.request("GET", f"/api/session/export?session_id={sid}&format=json")
    row = srv.post_json("/api/session/import", json.loads(body))["session"]
    assert row["session_id"] != sid and row["message_count"] == 4 and row["title"] == "Round trip"


@pytest.mark.parametrize(
    "payload",
    [
        {"session_id": "../../etc/passwd", "messages": _msgs(2)},
        {"session_id": "/tmp/evil", "workspace": "/etc", "worktree_path": "../../..", "messages": _msgs(1)},
        {
            "session_id": "..\\..\\x",
            "title": {"nested": True},
            "created_at": "yesterday",
            "messages": [{"role": "user", "content": {"x": 1}}],
        },
    ],
)
def test_hostile_imports_get_safe_ids_and_write_only_in_the_session_folder(srv, payload):
    before = _files_outside_state(srv)
    session_files = set(os.listdir(srv.session_dir))
    row = srv.post_json("/api/session/import", payload)["session"]
    assert row["session_id"] not in (payload["session_id"],) and row["session_id"].isalnum()
    new_files = set(os.listdir(srv.session_dir)) - session_files
    assert f"{row['session_id']}.json" in new_files
    assert all(name == f"{row['session_id']}.json" or name.startswith("_index.json") for name in new_files)
    assert row["workspace"] == str(srv.workspace)
    assert _files_outside_state(srv) == before


@pytest.mark.parametrize(
    "payload",
    [
        {"messages": "lots"},
        {"messages": [1, 2]},
        {"messages": [{"role": None, "content": "x"}]},
        {"title": "no messages"},
    ],
)
def test_invalid_imports_are_400_and_write_nothing(srv, payload):
    session_files = set(os.listdir(srv.session_dir))
    status, data = srv.json("POST", "/api/session/import", payload)
    assert status == 400 and "error" in data
    assert {n for n in os.listdir(srv.session_dir) if not n.startswith("_index")} == {
        n for n in session_files if not n.startswith("_index")
    }


def test_huge_import_is_413_and_writes_nothing(srv):
    session_files = {n for n in os.listdir(srv.session_dir) if not n.startswith("_index")}
    status, _ = srv.json("POST", "/api/session/import", {"messages": _msgs(1, "y" * (BODY_LIMIT + 1))})
    assert status == 413
    assert {n for n in os.listdir(srv.session_dir) if not n.startswith("_index")} == session_files


# ---------------------------------------------------------------------- history edits, compression, recovery


def test_retry_undo_truncate_clear(srv):
    sid = _import(srv, "Edits", _msgs(6))
    retry = srv.post_json("/api/session/retry", {"session_id": sid})
    assert (
        retry["ok"] is True
        and retry["last_user_text"] == "message 4"
        and retry["session"]["total_messages"] == 4
    )
    undo = srv.post_json("/api/session/undo", {"session_id": sid})
    assert undo["removed_count"] == 2 and undo["session"]["total_messages"] == 2
    truncated = srv.post_json("/api/session/truncate", {"session_id": sid, "keep_count": 1})
    assert truncated["ok"] is True and truncated["session"]["total_messages"] == 1
    cleared = srv.post_json("/api/session/clear", {"session_id": sid})
    assert cleared["session"]["total_messages"] == 0
    assert srv.json("POST", "/api/session/undo", {"session_id": sid}) == (200, {"error": "Nothing to undo."})
    assert srv.json("POST", "/api/session/truncate", {"session_id": sid, "keep_count": -2})[0] == 400
    assert srv.json("POST", "/api/session/clear", {"session_id": "nosuch"})[0] == 404


def test_compress_routes_without_enough_conversation(srv):
    sid = _import(srv, "Short", _msgs(2))
    status, data = srv.json("POST", "/api/session/compress", {"session_id": sid})
    assert status == 400 and data["error"].startswith("Not enough conversation")
    assert srv.json("POST", "/api/session/compress", {}) == (
        400,
        {"error": "Missing required field(s): session_id"},
    )
    assert srv.get_json(f"/api/session/compress/status?session_id={sid}")["status"] == "idle"
    assert srv.json("POST", "/api/session/uncompress", {"session_id": sid})[0] == 409


def test_recovery_audit_and_repair(srv):
    audit = srv.get_json("/api/session/recovery/audit")
    assert audit["status"] in ("ok", "warn", "needs_manual_review") and "items" in audit
    repair = srv.post_json("/api/session/recovery/repair-safe", {})
    assert {"before", "after", "recovery"} <= set(repair)


def test_recovery_answers_name_files_relative_to_the_state_folder(tmp_path):
    """The audit and the repair answered with the server's absolute paths (its folders, its user's name)."""
    server = ServerProc(tmp_path)
    with server:
        folder = server.session_dir
        (folder / "broken.json").write_text("{not json")  # no backup: a person decides
        (folder / "not a session id.json").write_text("{}")  # a name recovery ignores
        full = {"session_id": "shrunk", "messages": conversation("u1", "a1", "u2", "a2")}
        (folder / "shrunk.json.bak").write_text(json.dumps(full))
        (folder / "shrunk.json").write_text(json.dumps({**full, "messages": full["messages"][:1]}))
        audit = server.get_json("/api/session/recovery/audit")
        repair = server.post_json("/api/session/recovery/repair-safe", {})
    assert str(tmp_path) not in json.dumps(audit) + json.dumps(repair)
    assert audit["session_dir"] == repair["session_dir"] == "sessions"
    assert {item["path"] for item in audit["items"]} >= {
        "sessions/broken.json",
        "sessions/not a session id.json",
        "sessions/shrunk.json",
    }
    [restored] = [d for d in repair["recovery"]["details"] if d.get("restored")]
    assert restored["kept_path"].startswith("sessions/shrunk.json.replaced-")


def test_chat_routes_validate_before_anything_runs(srv):
    assert srv.json("POST", "/api/chat/start", {"message": "hi"})[0] == 400
    assert srv.json("POST", "/api/chat/start", {"session_id": "abc", "message": ""})[0] == 400
    assert srv.json("POST", "/api/chat/start", {"session_id": "abc", "message": "x" * (201 * 1024)})[0] == 413
    assert srv.json("GET", "/api/chat/stream?stream_id=../x")[0] == 400
    assert srv.json("POST", "/api/chat/cancel", {})[0] == 400


def test_sigterm_flushes_the_index_and_restart_keeps_everything(tmp_path):
    with ServerProc(tmp_path, env={"TALARIA_INDEX_FLUSH_DELAY": "30"}) as server:
        sid = _import(server, "Survives", _msgs(2))
        assert server.stop() == 0
        index = json.loads((server.session_dir / "_index.json").read_bytes())
        assert sid in {row["session_id"] for row in index}
        server.start()
        assert server.get_json(f"/api/session?session_id={sid}")["session"]["total_messages"] == 2


# ---------------------------------------------------------------------- auth


PASSWORD = "integration-secret"


@pytest.fixture(scope="module")
def auth_srv(tmp_path_factory):
    server = ServerProc(tmp_path_factory.mktemp("auth"), password=PASSWORD)
    server.start()
    yield server
    server.stop()


def _login(srv: ServerProc, password: str = PASSWORD) -> tuple[int, dict, dict]:
    status, headers, body = srv.request("POST", "/api/auth/login", {"password": password})
    return status, headers, json.loads(body)


def test_auth_without_a_cookie_is_401_but_health_and_page_are_public(auth_srv):
    assert auth_srv.json("GET", "/api/sessions")[0] == 401
    assert auth_srv.json("POST", "/api/session/new", {})[0] == 401
    assert auth_srv.json("GET", "/health")[0] == 200
    assert auth_srv.request("GET", "/")[0] == 200
    assert auth_srv.get_json("/api/auth/status") == {"enabled": True, "logged_in": False, "csrf_token": None}


def test_login_cookie_and_csrf(auth_srv):
    status, headers, data = _login(auth_srv)
    assert status == 200 and data["ok"] is True
    cookie = headers["set-cookie"].split(";", 1)[0]
    assert "HttpOnly" in headers["set-cookie"] and "SameSite=Strict" in headers["set-cookie"]
    assert auth_srv.json("GET", "/api/sessions", headers={"Cookie": cookie})[0] == 200
    assert auth_srv.json("POST", "/api/session/new", {}, headers={"Cookie": cookie})[0] == 403
    assert (
        auth_srv.json("POST", "/api/session/new", {}, headers={"Cookie": cookie, "X-CSRF-Token": "forged"})[0]
        == 403
    )
    assert (
        auth_srv.json(
            "POST", "/api/session/new", {}, headers={"Cookie": cookie, "X-CSRF-Token": data["csrf_token"]}
        )[0]
        == 200
    )
    status_data = auth_srv.get_json("/api/auth/status", headers={"Cookie": cookie})
    assert status_data["logged_in"] is True and status_data["csrf_token"] == data["csrf_token"]


def test_forged_cookie_is_401(auth_srv):
    _, headers, _ = _login(auth_srv)
    name, value = headers["set-cookie"].split(";", 1)[0].split("=", 1)
    body, _, signature = value.rpartition(".")
    for forged in (f"{body}.{signature[::-1]}", f"{body}x.{signature}", "eyJzaWQiOiJ4In0.AAAA", ""):
        assert auth_srv.json("GET", "/api/sessions", headers={"Cookie": f"{name}={forged}"})[0] == 401


def test_logout_ends_the_session(auth_srv):
    _, headers, data = _login(auth_srv)
    cookie = headers["set-cookie"].split(";", 1)[0]
    status, out_headers, _ = auth_srv.request("POST", "/api/auth/logout", {}, {"Cookie": cookie})
    assert status == 200 and "Max-Age=0" in out_headers["set-cookie"]
    assert auth_srv.json("GET", "/api/sessions", headers={"Cookie": cookie})[0] == 401


def test_login_rate_limit_is_429(tmp_path):
    with ServerProc(tmp_path, password=PASSWORD) as server:
        statuses = [_login(server, "wrong")[0] for _ in range(5)]
        assert statuses == [401] * 5
        status, _, data = _login(server, "wrong")
        assert status == 429 and data["retry_after"] >= 1
        assert _login(server)[0] == 429  # even the right password waits out the lockout


def test_refuses_to_listen_on_all_interfaces_without_a_password(tmp_path):
    server = ServerProc(tmp_path, host="0.0.0.0")
    result = subprocess.run(
        server.command(), env=server.environment(), capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2
    assert "without a password" in result.stderr and "listening" not in result.stdout

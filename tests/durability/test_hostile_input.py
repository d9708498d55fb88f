"""Hostile input: corrupt, truncated, huge, non-UTF-8 files and state.db, symlinks, FIFOs, hostile ids, fuzzed routes.

Recovery, index rebuild, audit, load and listing never crash or hang, never touch a file outside the
state folder, never write the agent's database, and keep every corrupt file. Every route answers a hostile
id with a JSON 4xx and changes nothing; fuzzed requests never get a 500.
"""

from __future__ import annotations

import collections
import concurrent.futures
import json
import random
import socket
import string

import pytest

from api.services.session_recovery import audit_session_recovery, recover_all_sessions_on_startup
from api.store import models, tombstones
from api.web import routes
from talaria_testing import promises
from talaria_testing.hostile import (
    BIGINT_DOC,
    HOSTILE_IDS,
    RESERVED_IDS,
    RecordingHandler,
    build_hostile_folder,
    contents_present,
    get_session_child,
    hostile_http_request,
    hostile_state_dbs,
    read_response_head,
    tree_signature,
)
from talaria_testing.killing import run_child
from talaria_testing.scenarios import SID, bound, messages
from talaria_testing.server_proc import ServerProc

SECTION = "hostile_input"


def _save(sid: str, n: int) -> models.Session:
    s = models.Session(session_id=sid, title=sid, model="fake", messages=messages(n))
    s.save()
    return s


@pytest.fixture
def hostile(tmp_path, durability):
    root, outside = tmp_path / "state", tmp_path / "outside"
    with bound(root) as sessions:
        _save("good1", 6)
        good2 = _save("good2", 12)
        good2.messages = good2.messages[:4]
        good2.save()  # a genuine loss: the backup holds 12
        (sessions / "orphan_tomb.json.bak").write_text(
            json.dumps({"session_id": "orphan_tomb", "messages": messages(3)})
        )
        tombstones.add_deleted(sessions, "orphan_tomb")
        kinds = build_hostile_folder(sessions, outside, huge_valid=durability.full)
    return root, sessions, outside, kinds


def test_recovery_index_and_audit_survive_a_hostile_folder(hostile, counters):
    root, sessions, outside, kinds = hostile
    outside_before = tree_signature(outside)
    kept_before = contents_present(sessions)
    huge_before = {n: (sessions / n).stat().st_size for n in ("huge.json", "hugebak.json.bak")}
    for run in range(2):
        result = recover_all_sessions_on_startup(sessions, rebuild_index=True)
        audit = audit_session_recovery(sessions)
        counters.add(SECTION, "recovery_runs")
        assert audit.get("status") in ("ok", "warn", "needs_manual_review"), audit
        assert not [e for e in result["errors"] if e.get("session_id") is None], result["errors"]
        if run == 1:
            assert result["restored"] == 0, "a second sweep restored again"
    counters.add(SECTION, "hostile_files", len(kinds))
    assert tree_signature(outside) == outside_before, "a file outside the state folder changed"
    assert kept_before <= contents_present(sessions), "recovery lost the bytes of a file it found"
    assert {n: (sessions / n).stat().st_size for n in huge_before} == huge_before
    assert len(models._load_session_from_path(sessions / "good2.json").messages) == 12, (
        "genuine loss not recovered"
    )
    assert len(models._load_session_from_path(sessions / "orphan.json").messages) == 5, (
        "orphan backup not restored"
    )
    assert not (sessions / "orphan_tomb.json").exists(), "a deleted session came back from its backup"
    victim = json.dumps({"session_id": "victim", "title": "victim", "messages": messages(2)}).encode()
    assert (sessions / "victim.json").read_bytes() == victim, "a backup link leading outside was restored"
    assert (sessions / "victim2.json").is_symlink(), "recovery wrote through a link that leaves the folder"


def test_hostile_state_dbs_are_never_written_and_never_stop_recovery(counters, tmp_path):
    dbs = hostile_state_dbs(tmp_path / "dbs")
    problems: list[str] = []
    for name, db in dbs.items():
        root = tmp_path / f"state-{name}"
        with bound(root) as sessions:
            (sessions / "orphan.json.bak").write_text(
                json.dumps({"session_id": "orphan", "messages": messages(5)})
            )
            (sessions / "stranger.json.bak").write_text(
                json.dumps({"session_id": "stranger", "messages": messages(5)})
            )
            before = tree_signature(db.parent)
            result = recover_all_sessions_on_startup(sessions, rebuild_index=True, state_db_path=db)
            audit = audit_session_recovery(sessions, db)
            shown = models.reconciled_state_db_messages_for_session(
                models.Session(session_id="orphan", messages=messages(2))
            )
            rows = models.get_state_db_session_messages("orphan", db_path=db)
        counters.add(SECTION, "hostile_state_dbs")
        if tree_signature(db.parent) != before:
            problems.append(f"P7 state.db '{name}' or its -wal/-shm changed: {tree_signature(db.parent)}")
        if result["errors"] or audit.get("status") not in ("ok", "warn", "needs_manual_review"):
            problems.append(f"state.db '{name}': errors {result['errors']} audit {audit.get('status')}")
        if not isinstance(shown, list) or not isinstance(rows, list):
            problems.append(f"state.db '{name}': reconciliation did not answer a list")
        if not (sessions / "orphan.json").exists():
            problems.append(
                f"state.db '{name}': an orphan backup the agent still knows (or cannot say) was not restored"
            )
        if name in ("valid", "wal_clean", "symlink_outside") and (sessions / "stranger.json").exists():
            problems.append(f"state.db '{name}': an orphan backup without a state.db row was restored")
    assert not problems, "\n".join(problems)


def test_a_number_too_large_for_a_float_does_not_break_the_sidebar(counters, tmp_path):
    """One session file with a 400-digit ``updated_at`` must not take the sidebar (or the index) down."""
    with bound(tmp_path / "state") as sessions:
        _save("good1", 6)
        (sessions / "bigint.json").write_bytes(BIGINT_DOC)
        models.store().index.forget(sessions)
        recover_all_sessions_on_startup(sessions, rebuild_index=True)
        handler = RecordingHandler()
        routes.dispatch(handler, "GET", "/api/sessions", {})
        counters.add(SECTION, "hostile_files")
        assert handler.status == 200, handler.json()
        assert "good1" in {r["session_id"] for r in models.all_sessions()}


def test_listing_and_index_rebuild_list_exactly_the_readable_sessions(hostile, counters):
    root, sessions, outside, kinds = hostile
    outside_before = tree_signature(outside)
    with bound(root):
        models.store().index.rebuild_index_file(sessions)
        rows = models.all_sessions()
        handler = RecordingHandler()
        routes.dispatch(handler, "GET", "/api/sessions", {})
    listed = {r["session_id"] for r in rows}
    counters.add(SECTION, "listings")
    assert handler.status == 200, handler.json()
    assert {"good1", "good2", "victim"} <= listed
    assert not any("." in sid or " " in sid for sid in listed)
    assert not listed & {"link_out", "zero", "fifo", "dir", "dirlink", "loop", "dangling", "victim2"}, (
        "a link or special file was listed"
    )
    assert tree_signature(outside) == outside_before


def test_loading_every_hostile_file_answers_without_crash_hang_or_runaway_memory(hostile, counters):
    root, sessions, outside, kinds = hostile
    outside_before = tree_signature(outside)
    stems = sorted({n[: -len(".json")] for n in kinds if n.endswith(".json")} | {"good1", "good2"})
    failures = []
    for stem in stems:
        msgs, reached = run_child(get_session_child, (str(root), stem), until=lambda m: True, timeout=5)
        counters.add(SECTION, "hostile_loads")
        if not reached:
            failures.append(
                f"GET /api/session?session_id={stem!r} ({kinds.get(stem + '.json')}): no answer within 5 s (hang or crash)"
            )
            continue
        status, payload = msgs[0]
        if status is None:
            failures.append(f"{stem!r}: raised {payload}")
        elif not isinstance(payload, dict) or (status >= 400 and set(payload) - {"error", "limit"}):
            failures.append(f"{stem!r}: answer is not the JSON shape: {status} {str(payload)[:100]}")
        elif status >= 500 and payload.get("error") == "Internal error":
            failures.append(f"{stem!r} ({kinds.get(stem + '.json')}): unhandled error (500 Internal error)")
    assert tree_signature(outside) == outside_before
    assert not failures, "\n".join(failures)


CREATING = {"/api/session/new", "/api/session/import"}  # they take no id: they make one
ID_ROUTES = [
    (m, p)
    for (m, p) in routes.ROUTES
    if (p.startswith("/api/session") or p.startswith("/api/chat"))
    and p not in CREATING
    and p != "/api/sessions/feed"  # takes no id, and streams until the client leaves
]


def _request(method: str, path: str, fields: dict) -> RecordingHandler:
    handler = RecordingHandler(method)
    if method == "GET":
        routes.dispatch(handler, method, path, {k: v for k, v in fields.items() if isinstance(v, str)})
    else:
        routes.dispatch(handler, method, path, {}, fields)
    return handler


def test_hostile_ids_on_every_route_get_a_json_4xx_and_change_nothing(counters, tmp_path):
    root = tmp_path / "state"
    with bound(root) as sessions:
        _save(SID, 6)
        tombstones.add_deleted(sessions, "gone1")
        models.store().index.flush()
        before = tree_signature(root)
        failures = []
        for method, path in ID_ROUTES:
            for sid in HOSTILE_IDS:
                for field in ("session_id", "stream_id", "undo_token"):
                    if path == "/api/chat/start":
                        fields = {field: sid, "message": ""}
                    else:
                        fields = {field: sid, "title": "t", "keep_count": 0, "pinned": True, "archived": True}
                    handler = _request(method, path, fields)
                    counters.add(SECTION, "hostile_id_requests")
                    payload = handler.json()
                    ok = handler.status is not None and (handler.status < 500 or handler.status == 503)
                    if not ok or not isinstance(payload, dict):
                        failures.append(
                            f"{method} {path} {field}={sid!r}: {handler.status} {str(payload)[:120]}"
                        )
        changed = {
            k for k in set(before) | set(tree_signature(root)) if before.get(k) != tree_signature(root).get(k)
        }
    assert not failures, "\n".join(failures[:20])
    assert not changed, f"hostile ids changed files: {sorted(changed)}"


@pytest.mark.parametrize("sid", RESERVED_IDS)
def test_reserved_file_names_are_not_sessions(sid, counters, tmp_path):
    """``_index``, the tombstones: inside the id alphabet, but no route may load or rewrite them as a session."""
    with bound(tmp_path / "state") as sessions:
        _save(SID, 6)
        tombstones.add_deleted(sessions, "gone1")
        tombstones.add_pruned(sessions, "gone2")
        models.store().index.flush()
        reserved = sessions / f"{sid}.json"
        before = reserved.read_bytes()
        for method, path, fields in (
            ("GET", "/api/session", {"session_id": sid}),
            ("POST", "/api/session/rename", {"session_id": sid, "title": "pwned"}),
            ("POST", "/api/session/pin", {"session_id": sid, "pinned": True}),
            ("POST", "/api/session/clear", {"session_id": sid}),
            ("POST", "/api/session/delete", {"session_id": sid}),
        ):
            handler = _request(method, path, fields)
            counters.add(SECTION, "hostile_id_requests")
            assert handler.status in (400, 404), f"{method} {path} {sid}: {handler.status} {handler.json()}"
        assert reserved.read_bytes() == before, f"{sid}.json was rewritten through a session route"


# ---------------------------------------------------------------------- fuzzing every route

_TEXT = string.ascii_letters + string.digits + " _-./\\%\x00\n\t'\"<>{}[]éü日本語\U0001f600\ud800"


def _value(rng: random.Random, ids: list):
    kind = rng.randrange(12)
    if kind < 3:
        return rng.choice(ids)
    if kind == 3:
        return rng.choice(HOSTILE_IDS)
    if kind == 4:
        return "".join(rng.choice(_TEXT) for _ in range(rng.choice((0, 1, 5, 40, 300, 5000))))
    if kind == 5:
        return rng.choice((0, 1, -1, 2, 7, 10**20, -(10**20), 3.5, float("1e308")))
    if kind == 6:
        return rng.choice((True, False, None))
    if kind == 7:
        return [rng.choice(ids), 1, None]
    if kind == 8:
        return {"role": "user", "content": "x", "timestamp": rng.random()}
    if kind == 9:
        return rng.choice(("json", "md", "html", "pdf", "", "../x"))
    if kind == 10:
        return [
            {
                "role": rng.choice(("user", "assistant", "tool", 5)),
                "content": rng.choice(("hi", None, 3)),
                "timestamp": rng.choice((1.0, "x", None)),
            }
        ]
    return rng.choice(ids) + rng.choice(("", "-1234567890123", ".json"))


FIELDS = (
    "session_id", "title", "pinned", "archived", "keep_count", "focus_topic", "topic", "undo_token", "message",
    "model", "workspace", "format", "q", "content", "msg_limit", "msg_before", "stream_id", "password",
    "messages", "context_messages", "after", "zzz",
)  # fmt: skip


def test_fuzzed_requests_on_every_route_never_get_a_500(durability, counters, scratch):
    n_requests = 10_000 if durability.full else 1_500
    rng = random.Random(4242)
    # The sidebar feed streams until its client leaves; the real-server fuzz below covers it.
    table = [route for route in routes.ROUTES if route != ("GET", "/api/sessions/feed")] + [
        ("GET", "/api/nope"),
        ("POST", "/api/session"),
        ("DELETE", "/api/session"),
        ("PUT", "/api/session/new"),
    ]
    server_errors: list[str] = []
    statuses: dict[int, int] = {}
    with bound(scratch / "state") as sessions:
        ids = [_save(f"fz{k}", 6 + 2 * k).session_id for k in range(5)]
        for _ in range(n_requests):
            method, path = rng.choice(table)
            fields = {f: _value(rng, ids) for f in rng.sample(FIELDS, rng.randint(0, 6))}
            if rng.random() < 0.6:
                fields["session_id"] = rng.choice(ids)
            if path == "/api/chat/start":
                fields["message"] = rng.choice(("", None, 5, []))  # never start a real agent turn
            handler = _request(method, path, fields)
            statuses[handler.status] = statuses.get(handler.status, 0) + 1
            if handler.status is None or handler.status >= 500 and handler.status != 503:
                server_errors.append(
                    f"{method} {path} {str(fields)[:200]} -> {handler.status} {str(handler.json())[:200]}"
                )
        models.store().index.flush()
        models.store().sessions.clear()
        unreadable = [
            p.name
            for p in sessions.glob("*.json")
            if not isinstance(promises.parse(p.read_bytes()), (dict, list))
        ]
        index_problems = promises.index_violations(sessions)
    counters.add(SECTION, "fuzzed_requests", n_requests)
    counters.add(SECTION, "fuzz_500s", len(server_errors))
    counters.set(
        SECTION, "fuzz_statuses", {str(k): v for k, v in sorted(statuses.items(), key=lambda kv: str(kv[0]))}
    )
    for e in server_errors[:50]:
        counters.violation(SECTION, "route fuzz", e)
    assert not server_errors, "\n".join(server_errors[:15])
    assert not unreadable, unreadable
    assert not index_problems, index_problems


def test_lone_surrogates_in_a_title_do_not_stop_the_index_from_being_written(counters, tmp_path):
    """One file whose title holds ``\\ud800`` must not keep ``_index.json`` from reaching the disk."""
    with bound(tmp_path / "state") as sessions:
        _save("good1", 6)
        (sessions / "surrogate.json").write_bytes(
            b'{"session_id": "surrogate", "title": "\\ud800 odd", "messages": [], "created_at": 1, "updated_at": 2}'
        )
        models.store().index.rebuild_index_file(sessions)
        counters.add(SECTION, "hostile_files")
        problems = promises.index_violations(sessions)
    assert not problems, problems


def _exchange(port: int, raw: bytes) -> tuple[bytes, dict[str, str], bytes]:
    with socket.create_connection(("127.0.0.1", port), timeout=20) as sock:
        try:
            sock.sendall(raw)
        except OSError:
            pass  # the server may answer (and close) before the whole request is sent
        status, headers, body = read_response_head(sock)
        if status.startswith(b"HTTP/1.1 100"):
            status, headers, body = read_response_head(sock)
        return status, headers, body


def test_hostile_methods_headers_and_framing_on_the_real_server_never_get_a_500(
    durability, counters, tmp_path
):
    """Raw requests with hostile methods, Host/Origin headers, Content-Length, framing and bodies: every
    answer has a status line, the security headers and, for an error, the JSON shape; none is a 500."""
    n_requests = 10_000 if durability.full else 600
    rng = random.Random(1515)
    env = {
        "TALARIA_REQUEST_HEAD_TIMEOUT": "2",
        "TALARIA_REQUEST_TIMEOUT": "2",
        "TALARIA_MAX_BODY_BYTES": "65536",
    }
    server = ServerProc(tmp_path / "srv", env=env)
    server.start()
    try:
        sids = [
            server.post_json("/api/session/new", {"title": f"h{k}"})["session"]["session_id"]
            for k in range(3)
        ]
        requests = [hostile_http_request(rng, server.port, sids) for _ in range(n_requests)]
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            answers = list(pool.map(lambda raw: _exchange(server.port, raw), requests))
        failures, statuses = [], collections.Counter()
        for raw, (status_line, headers, body) in zip(requests, answers, strict=True):
            parts = status_line.split()
            status = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else None
            statuses[status] += 1
            problem = None
            if status is None or not status_line.startswith(b"HTTP/1."):
                problem = "no status line"
            elif status >= 500 and status not in (501, 503, 505):
                problem = "server error"
            elif headers.get("x-content-type-options") != "nosniff" or not headers.get(
                "content-security-policy"
            ):
                problem = "missing security headers"
            elif (
                status >= 400
                and headers.get("content-type", "").startswith("application/json")
                and body
                and not isinstance(json.loads(body).get("error"), str)
            ):
                problem = "error without the JSON shape"
            if problem:
                failures.append(f"{problem}: {raw[:160]!r} -> {status_line[:80]!r}")
        counters.add(SECTION, "hostile_http_requests", n_requests)
        counters.add(SECTION, "hostile_http_answered_200", statuses[200])
        counters.add(SECTION, "hostile_http_refused", sum(n for s, n in statuses.items() if s and s >= 400))
        assert not failures, "\n".join(failures[:20])
        assert server.request("GET", "/health")[0] == 200
        assert server.request("GET", "/api/sessions")[0] == 200
    finally:
        server.stop()
    assert "Traceback" not in server.log_text(), server.log_text()[-4000:]

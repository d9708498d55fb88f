"""Every route of the real server fuzzed with hypothesis: random methods, paths, query strings and bodies
(hostile ids included) must never get a 500 and never create a file outside the state folder.

The default run is short; ``pytest -m slow tests/integration/test_route_fuzz.py`` runs the long one.
"""

from __future__ import annotations

import http.client
import json
import os
from pathlib import Path
from urllib.parse import quote, urlencode

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from api.web.routes import PATHS, ROUTES
from talaria_testing.server_proc import ServerProc

pytestmark = pytest.mark.integration

DEFAULT_EXAMPLES = 400
LONG_EXAMPLES = 6000

METHODS = ["GET", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "HEAD"]
HOSTILE_IDS = [
    "../../etc/passwd", "..", ".", "/", "", " ", "\t", "a/b", "a\\b", "%2e%2e%2f", "x" * 201, "a" * 200, "\x00",
    "café", "abc.json", "_index", "_deleted_webui_sessions", "_pruned_webui_orphans", "-", "CON", "null", "0",
    "abc-1234567890123", "../../etc/passwd-1234567890123", "nosuch-1700000000000",
]  # fmt: skip
EXTRA_PATHS = [
    "/", "/index.html", "/static/index.html", "/static/../server.py", "/static/%2e%2e/%2e%2e/etc/passwd", "/api",
    "/api/", "/api/session/", "/api/session/../sessions", "/api/sessions/", "//api/sessions", "/static/", "/favicon.ico",
]  # fmt: skip
QUERY_KEYS = ["session_id", "msg_limit", "msg_before", "q", "content", "format", "stream_id", "after"]
BODY_KEYS = [
    "session_id", "title", "pinned", "archived", "keep_count", "undo_token", "messages", "message", "stream_id",
    "focus_topic", "topic", "model", "workspace", "password", "q", "context_messages", "created_at", "session",
]  # fmt: skip
CONTENT_TYPES = ["application/json"] * 8 + [
    "application/json; charset=utf-8",
    "text/plain",
    "application/x-www-form-urlencoded",
    None,
    "application/merge-patch+json",
]
WORKSPACES = ["/etc", "/", "../..", "~", "/tmp", "relative/dir", "\x00", ""]

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=40),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=12,
)


def _weighted(*branches: tuple[int, st.SearchStrategy]) -> st.SearchStrategy:
    """Pick a branch with the given weights (``one_of`` alone drifts towards its simplest branch)."""
    table = [strategy for weight, strategy in branches for _ in range(weight)]
    return st.integers(0, len(table) - 1).flatmap(lambda i: table[i])


def _ids(known: list[str]):
    return _weighted(
        (5, st.sampled_from(known)), (3, st.sampled_from(HOSTILE_IDS)), (2, st.text(max_size=24))
    )


def _message():
    return st.fixed_dictionaries(
        {"role": st.sampled_from(["user", "assistant", "tool", "system"]) | json_values},
        optional={
            "content": json_values,
            "timestamp": json_values,
            "tool_calls": json_values,
            "_partial": st.booleans(),
        },
    )


def _body(known: list[str]):
    values = {
        "session_id": _weighted((9, _ids(known)), (1, json_values)),
        "undo_token": _weighted((4, _ids(known)), (1, json_values)),
        "stream_id": _weighted((4, _ids(known)), (1, json_values)),
        "workspace": _weighted((4, st.sampled_from(WORKSPACES)), (1, json_values)),
        "messages": _weighted((4, st.lists(_message(), max_size=5)), (1, json_values)),
        "context_messages": _weighted((4, st.lists(_message(), max_size=3)), (1, json_values)),
        "pinned": _weighted((4, st.booleans()), (1, json_values)),
        "archived": _weighted((4, st.booleans()), (1, json_values)),
        "keep_count": _weighted((4, st.integers(-2, 6)), (1, json_values)),
    }
    fields = st.fixed_dictionaries({}, optional={k: values.get(k, json_values) for k in BODY_KEYS})
    extra = st.dictionaries(st.text(max_size=12), json_values, max_size=3)
    as_object = st.tuples(fields, extra).map(lambda pair: json.dumps({**pair[1], **pair[0]}).encode())
    other = st.one_of(
        st.binary(max_size=120),
        json_values.map(lambda v: json.dumps(v).encode()),
        st.just(b""),
    )
    return _weighted((8, as_object), (2, other))


def _method_and_path():
    """Mostly real routes with their own method; some with a random method; some made-up paths."""
    random_api = st.text(alphabet=st.characters(codec="utf-8"), max_size=30).map(
        lambda t: "/api/" + quote(t, safe="/%")
    )
    routes = st.sampled_from(sorted(ROUTES))
    wrong_method = st.tuples(st.sampled_from(METHODS), st.sampled_from(sorted(PATHS)))
    made_up = st.tuples(st.sampled_from(METHODS), st.sampled_from(EXTRA_PATHS) | random_api)
    return _weighted((8, routes), (1, wrong_method), (1, made_up))


def _query(known: list[str]):
    keys = _weighted((4, st.sampled_from(QUERY_KEYS)), (1, st.text(max_size=8)))
    values = _weighted(
        (4, _ids(known)),
        (2, st.integers(-5, 10**13).map(str)),
        (2, st.sampled_from(["json", "md", "html", "pdf", "1", "true"])),
    )
    session_first = st.fixed_dictionaries({"session_id": _ids(known)})
    return st.tuples(session_first, st.dictionaries(keys, values, max_size=4)).map(
        lambda pair: {**pair[0], **pair[1]}
    )


@st.composite
def requests(draw, known: list[str]):
    method, path = draw(_method_and_path())
    query = draw(_query(known))
    body = draw(_body(known)) if method in ("POST", "PUT", "PATCH") else None
    content_type = draw(st.sampled_from(CONTENT_TYPES))
    if path == "/api/chat/start" and body:
        # Never start a real agent turn on a real session here (that is the streaming suite's job).
        for sid in known:
            body = body.replace(json.dumps(sid).encode(), b'"fuzz-no-such-session"')
    return method, path, query, body, content_type


def _send(srv: ServerProc, method: str, path: str, query: dict, body: bytes | None, content_type: str | None):
    target = path + ("?" + urlencode(query) if query else "")
    headers = {"Content-Type": content_type} if content_type and body is not None else {}
    conn = http.client.HTTPConnection(srv.host, srv.port, timeout=30)
    try:
        conn.request(method, target, body=body, headers=headers)
        resp = conn.getresponse()
        content_type = resp.getheader("Content-Type") or ""
        if content_type.startswith("text/event-stream"):
            return resp.status, content_type, b""  # a stream that only ends when the client leaves
        return resp.status, content_type, resp.read()
    finally:
        conn.close()


def _snapshot_outside_state(root: Path, state_dir: Path, log_path: Path) -> dict[str, int]:
    out = {}
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            path = Path(dirpath, name)
            if not path.is_relative_to(state_dir) and path != log_path:
                out[str(path)] = path.stat().st_size
    return out


@pytest.fixture(scope="module")
def fuzz_srv(tmp_path_factory):
    server = ServerProc(tmp_path_factory.mktemp("fuzz"), env={"TALARIA_MAX_BODY_BYTES": "65536"})
    server.start()
    known = []
    for i in range(4):
        messages = [
            {"role": "user", "content": f"hello {i}"},
            {"role": "assistant", "content": f"hi **{i}**"},
        ]
        known.append(
            server.post_json("/api/session/import", {"title": f"known {i}", "messages": messages})["session"][
                "session_id"
            ]
        )
    server.known_ids = known
    # The agent sets up its own home (SOUL.md, auth.lock) the first time its config is read; that is
    # the agent's doing, before the snapshot, not a write by a fuzzed request.
    server.get_json("/api/toolsets")
    yield server
    server.stop()


def _fuzz(srv: ServerProc, examples: int) -> None:
    before = _snapshot_outside_state(srv.root, srv.state_dir, srv.log_path)
    seen: list[tuple] = []

    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
    )
    @given(req=requests(srv.known_ids))
    def run(req):
        method, path, query, body, content_type = req
        status, response_type, raw = _send(srv, method, path, query, body, content_type)
        seen.append((method, path, status))
        if status >= 500:
            # Only an honest "this part is not built yet" is allowed to be a 5xx.
            assert status == 503 and b"not available" in raw, (method, path, query, body, status, raw[:300])
        if response_type.startswith("application/json") and method != "HEAD":
            data = json.loads(raw)
            if status >= 400:
                assert isinstance(data, dict) and isinstance(data.get("error"), str)

    run()
    assert _snapshot_outside_state(srv.root, srv.state_dir, srv.log_path) == before
    assert "unexpected error" not in srv.log_text(), srv.log_text()[-4000:]
    assert "Traceback" not in srv.log_text(), srv.log_text()[-4000:]
    assert len({p for _, p, _ in seen} & PATHS) >= len(PATHS) // 2  # the routes themselves were reached


def test_no_route_answers_500_or_writes_outside_the_state_dir(fuzz_srv):
    _fuzz(fuzz_srv, DEFAULT_EXAMPLES)


@pytest.mark.slow
def test_no_route_answers_500_long_run(fuzz_srv, request):
    if "slow" not in (request.config.getoption("markexpr") or ""):
        pytest.skip("long fuzz run: select it with -m slow")
    _fuzz(fuzz_srv, LONG_EXAMPLES)

"""The serving loop against the real server: slow and idle clients, strict framing, security headers.

Every socket here is opened by the test on 127.0.0.1, bounded in number and closed by the test.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Iterator

import pytest

from talaria_testing.server_proc import ServerProc
from talaria_testing.slow_readers import (
    read_all,
    request_without_reading,
    wait_until_answers_began,
)

pytestmark = pytest.mark.integration

HEAD_TIMEOUT_S = 2.0
REQUEST_TIMEOUT_S = 4.0
MAX_STREAMS = 45
SECURITY = {"x-content-type-options": "nosniff", "x-frame-options": "DENY", "referrer-policy": "no-referrer"}


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    server = ServerProc(
        tmp_path_factory.mktemp("http_server"),
        env={
            "TALARIA_SERVER_THREADS": "2",
            "TALARIA_REQUEST_HEAD_TIMEOUT": str(HEAD_TIMEOUT_S),
            "TALARIA_REQUEST_TIMEOUT": str(REQUEST_TIMEOUT_S),
            "TALARIA_MAX_BODY_BYTES": "65536",
            "TALARIA_MAX_STREAMS": str(MAX_STREAMS),
        },
    )
    server.start()
    yield server
    server.stop()
    assert "Traceback" not in server.log_text(), server.log_text()[-4000:]


def raw_exchange(srv: ServerProc, data: bytes, timeout: float = 10.0) -> tuple[int, dict, bytes]:
    """Send ``data`` as it is, read until the server closes; (status, headers, body)."""
    with socket.create_connection((srv.host, srv.port), timeout=timeout) as sock:
        sock.sendall(data)
        return _read_response(sock)


def _read_response(sock: socket.socket) -> tuple[int, dict, bytes]:
    chunks = []
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            break
        chunks.append(chunk)
    raw = b"".join(chunks)
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    assert lines[0].startswith("HTTP/1."), raw[:200]
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return int(lines[0].split()[1]), headers, body


def _assert_json_error(status: int, headers: dict, body: bytes, expected: int) -> None:
    assert status == expected, (status, body)
    assert headers["content-type"].startswith("application/json")
    assert isinstance(json.loads(body)["error"], str)
    assert {k: headers.get(k) for k in SECURITY} == SECURITY


@contextlib.contextmanager
def slow_sockets(srv: ServerProc, idle: int, trickling: int) -> Iterator[list[socket.socket]]:
    """``idle`` connections that send nothing and ``trickling`` ones that send a header byte every 0.2 s."""
    socks = [socket.create_connection((srv.host, srv.port), timeout=5) for _ in range(idle + trickling)]
    stop = threading.Event()

    def trickle(sock: socket.socket) -> None:
        payload = b"GET /health HTTP/1.0\r\nX-Slow: " + b"a" * 10_000
        for byte in payload:
            if stop.wait(0.2):
                return
            try:
                sock.send(bytes([byte]))
            except OSError:
                return

    threads = [threading.Thread(target=trickle, args=(s,), daemon=True) for s in socks[idle:]]
    for thread in threads:
        thread.start()
    try:
        yield socks
    finally:
        stop.set()
        for thread in threads:
            thread.join(5)
        for sock in socks:
            sock.close()


# ---------------------------------------------------------------------- slow and idle clients


def _answers_promptly(srv, *paths: str) -> None:
    """Ten rounds of GETs of ``paths``, each answered 200 within 5 s."""
    for _ in range(10):
        for path in paths:
            assert srv.request("GET", path, timeout=5)[0] == 200


def test_idle_and_trickling_sockets_leave_the_request_threads_free(srv):
    with slow_sockets(srv, idle=60, trickling=40):
        _answers_promptly(srv, "/health", "/api/sessions")


class Feed:
    """One open ``/api/sessions/feed``; ``next_event`` reads the next named event."""

    def __init__(self, srv: ServerProc, after: int | None = None):
        query = "" if after is None else f"?after={after}"
        self.sock = socket.create_connection((srv.host, srv.port), timeout=10)
        self.sock.sendall(f"GET /api/sessions/feed{query} HTTP/1.0\r\n\r\n".encode())
        self.reader = self.sock.makefile("rb")
        self.status = int(self.reader.readline().split()[1])
        self.headers = {}
        while (line := self.reader.readline().decode("latin-1").strip()) != "":
            name, _, value = line.partition(":")
            self.headers[name.lower()] = value.strip()

    def next_event(self) -> tuple[int, str, dict]:
        fields: dict[str, str] = {}
        while True:
            line = self.reader.readline().decode("utf-8")
            assert line, "the feed ended"
            line = line.rstrip("\n")
            if not line:
                if "event" in fields:
                    return int(fields["id"]), fields["event"], json.loads(fields["data"])
                fields = {}
            elif not line.startswith(":"):
                key, _, value = line.partition(":")
                fields[key] = value.strip()

    def close(self) -> None:
        self.reader.close()
        self.sock.close()


def test_open_streams_and_idle_sockets_leave_the_request_threads_free(srv):
    feeds = [Feed(srv) for _ in range(40)]
    try:
        assert {feed.status for feed in feeds} == {200}
        with slow_sockets(srv, idle=60, trickling=40):
            _answers_promptly(srv, "/health", "/api/sessions?limit=50")
    finally:
        for feed in feeds:
            feed.close()


def test_streams_past_their_budget_are_503_and_requests_still_answer(srv):
    feeds = []
    try:
        deadline = time.monotonic() + 20
        while len(feeds) < MAX_STREAMS and time.monotonic() < deadline:
            feed = Feed(srv)
            if feed.status == 200:
                feeds.append(feed)
            else:
                feed.close()  # a stream of an earlier test still winding down
                time.sleep(0.1)
        assert len(feeds) == MAX_STREAMS
        over = Feed(srv)
        assert over.status == 503
        over.close()
        assert srv.request("GET", "/health", timeout=5)[0] == 200
    finally:
        for feed in feeds:
            feed.close()


def test_a_trickling_client_is_cut_off_at_the_head_deadline(srv):
    with slow_sockets(srv, idle=0, trickling=1) as socks:
        started = time.monotonic()
        socks[0].settimeout(HEAD_TIMEOUT_S + 10)
        status, headers, body = _read_response(socks[0])
        elapsed = time.monotonic() - started
    _assert_json_error(status, headers, body, 408)
    assert elapsed < HEAD_TIMEOUT_S + 5


def test_an_idle_connection_is_closed_after_the_head_deadline(srv):
    with socket.create_connection((srv.host, srv.port), timeout=HEAD_TIMEOUT_S + 10) as sock:
        started = time.monotonic()
        assert sock.recv(100) == b""
        assert time.monotonic() - started < HEAD_TIMEOUT_S + 5


def test_a_body_trickled_past_the_total_deadline_is_408_and_changes_nothing(srv):
    before = srv.get_json("/health")["sessions"]
    with socket.create_connection((srv.host, srv.port), timeout=REQUEST_TIMEOUT_S + 10) as sock:
        body = b'{"title": "never"}'
        sock.sendall(
            b"POST /api/session/new HTTP/1.0\r\nContent-Type: application/json\r\n"
            + f"Content-Length: {len(body)}\r\n\r\n".encode()
        )
        started = time.monotonic()
        for byte in body[:10]:  # past the head deadline, short of the total one
            sock.send(bytes([byte]))
            time.sleep(0.3)
        status, headers, raw = _read_response(sock)
        elapsed = time.monotonic() - started
    _assert_json_error(status, headers, raw, 408)
    assert REQUEST_TIMEOUT_S - 1 < elapsed < REQUEST_TIMEOUT_S + 5
    assert srv.get_json("/health")["sessions"] == before


def test_a_request_split_across_many_packets_is_answered(srv):
    with socket.create_connection((srv.host, srv.port), timeout=10) as sock:
        for piece in (b"GET /hea", b"lth HTTP/1.1\r\nHo", b"st: 127.0.0.1:%d\r\n" % srv.port, b"\r\n"):
            sock.sendall(piece)
            time.sleep(0.05)
        status, _, body = _read_response(sock)
    assert status == 200 and json.loads(body)["ok"] is True


# ---------------------------------------------------------------------- strict framing


@pytest.mark.parametrize(
    "request_bytes, expected",
    [
        (b"garbage\r\n\r\n", 400),
        (b"GET /\r\n\r\n", 400),
        (b"GET / HTTP/9.9\r\n\r\n", 505),
        (b"BREW /api/sessions HTTP/1.0\r\n\r\n", 501),
        (b"GET /health HTTP/1.1\r\n\r\n", 400),
        (b"POST /api/session/new HTTP/1.0\r\nContent-Type: application/json\r\nContent-Length: +2\r\n\r\n{}", 400),
        (b"POST /api/session/new HTTP/1.0\r\nContent-Type: application/json\r\nContent-Length: 2 \r\n"
         b"Content-Length: 2\r\n\r\n{}", 400),
        (b"POST /api/session/new HTTP/1.0\r\nContent-Type: application/json\r\nContent-Length: 2\r\n"
         b"Content-Length: 3\r\n\r\n{} ", 400),
        (b"POST /api/session/new HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 411),
        (b"GET /health HTTP/1.0\r\n Folded: x\r\n\r\n", 400),
        (b"GET /" + b"a" * 9000 + b" HTTP/1.0\r\n\r\n", 414),
        (b"GET /health HTTP/1.0\r\n" + b"X-Big: " + b"b" * 70_000 + b"\r\n\r\n", 431),
    ],
)  # fmt: skip
def test_malformed_requests_get_a_json_error_with_a_status_line(srv, request_bytes, expected):
    _assert_json_error(*raw_exchange(srv, request_bytes), expected)


def test_unknown_method_is_a_json_501(srv):
    status, headers, body = srv.request("PROPFIND", "/api/sessions")
    _assert_json_error(status, headers, body, 501)


def test_deeply_nested_import_is_400_not_500(srv):
    deep = b"[" * 1000 + b'"x"' + b"]" * 1000
    body = b'{"title": "deep", "messages": [{"role": "user", "content": ' + deep + b"}]}"
    before = srv.get_json("/health")["sessions"]
    status, headers, raw = srv.request(
        "POST", "/api/session/import", body, {"Content-Type": "application/json"}
    )
    _assert_json_error(status, headers, raw, 400)
    assert "nested too deeply" in json.loads(raw)["error"]
    assert srv.get_json("/health")["sessions"] == before


def test_too_large_body_is_413_after_the_body_is_dropped(srv):
    body = b'{"pad": "' + b"x" * 100_000 + b'"}'
    status, headers, raw = srv.request("POST", "/api/session/new", body, {"Content-Type": "application/json"})
    _assert_json_error(status, headers, raw, 413)


def test_expect_100_continue_is_honoured(srv):
    body = b'{"title": "continued"}'
    with socket.create_connection((srv.host, srv.port), timeout=10) as sock:
        sock.sendall(
            b"POST /api/session/new HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: application/json\r\n"
            b"Expect: 100-continue\r\nContent-Length: %d\r\n\r\n" % (srv.port, len(body))
        )
        assert sock.recv(100).startswith(b"HTTP/1.1 100 Continue\r\n\r\n")
        sock.sendall(body)
        status, _, raw = _read_response(sock)
    assert status == 200 and json.loads(raw)["session"]["title"] == "continued"


@pytest.mark.parametrize("path", ["/", "/health", "/api/sessions", "/api/nope", "/static/nope.js"])
def test_every_response_carries_the_security_headers(srv, path):
    _, headers, _ = srv.request("GET", path)
    assert {k: headers.get(k) for k in SECURITY} == SECURITY
    assert headers.get("content-security-policy")


# ---------------------------------------------------------------------- host and origin


@pytest.mark.parametrize(
    "method, path", [("GET", "/api/sessions"), ("GET", "/"), ("POST", "/api/session/new")]
)
@pytest.mark.parametrize(
    "host", ["attacker.example", "attacker.example:{port}", "localhost.attacker.example", ""]
)
def test_a_foreign_host_is_421(srv, method, path, host):
    before = srv.get_json("/health")["sessions"]
    body = b"{}" if method == "POST" else None
    headers = {"Host": host.format(port=srv.port), "Content-Type": "application/json"}
    status, response_headers, raw = srv.request(method, path, body, headers)
    _assert_json_error(status, response_headers, raw, 421)
    assert srv.get_json("/health")["sessions"] == before


@pytest.mark.parametrize("host", ["localhost:{port}", "127.0.0.1:{port}", "LOCALHOST", "127.0.0.1:1"])
def test_loopback_names_and_addresses_are_served(srv, host):
    status, _, _ = srv.request("GET", "/api/sessions", headers={"Host": host.format(port=srv.port)})
    assert status == 200


@pytest.mark.parametrize(
    "headers",
    [{"Origin": "http://attacker.example"}, {"Origin": "null"}, {"Sec-Fetch-Site": "cross-site"},
     {"Referer": "http://attacker.example/x"}, {"Origin": "http://localhost:1"}],
)  # fmt: skip
def test_a_cross_site_state_change_is_403_and_changes_nothing(srv, headers):
    sid = srv.post_json("/api/session/new", {"title": "mine"})["session"]["session_id"]
    status, response_headers, raw = srv.request(
        "POST",
        "/api/session/rename",
        json.dumps({"session_id": sid, "title": "pwned"}).encode(),
        {"Content-Type": "application/json", **headers},
    )
    _assert_json_error(status, response_headers, raw, 403)
    assert srv.get_json(f"/api/session?session_id={sid}")["session"]["title"] == "mine"


def test_a_same_origin_state_change_is_served(srv):
    origin = f"http://127.0.0.1:{srv.port}"
    data = srv.post_json(
        "/api/session/new", {"title": "same"}, {"Origin": origin, "Sec-Fetch-Site": "same-origin"}
    )
    assert data["session"]["title"] == "same"


def test_a_simple_cross_site_post_with_an_empty_body_is_refused(srv):
    before = srv.get_json("/health")["sessions"]
    status, _, _ = srv.request("POST", "/api/session/new", b"", {"Content-Type": "text/plain"})
    assert status == 415
    assert srv.get_json("/health")["sessions"] == before


def test_allowed_hosts_setting_admits_a_proxy_name(tmp_path):
    with ServerProc(tmp_path, env={"TALARIA_ALLOWED_HOSTS": "talaria.example"}) as server:
        assert server.request("GET", "/health", headers={"Host": "talaria.example"})[0] == 200
        assert server.request("GET", "/health", headers={"Host": "other.example"})[0] == 421
        status, data = server.json(
            "POST", "/api/session/new", {}, {"Host": "talaria.example", "Origin": "https://talaria.example"}
        )
        assert status == 200


def test_an_http_1_0_request_without_host_is_served(srv):
    status, _, body = raw_exchange(srv, b"GET /health HTTP/1.0\r\n\r\n")
    assert status == 200 and json.loads(body)["ok"] is True


# ---------------------------------------------------------------------- the sidebar list and its feed


def test_the_sidebar_pages_and_the_feed_follow_every_change(srv):
    listing = srv.get_json("/api/sessions?limit=2")
    feed = Feed(srv, after=listing["feed_seq"])
    try:
        assert feed.status == 200 and feed.headers["content-type"].startswith("text/event-stream")
        assert {k: feed.headers.get(k) for k in SECURITY} == SECURITY
        sid = srv.post_json("/api/session/new", {"title": "followed"})["session"]["session_id"]
        _, name, data = feed.next_event()
        assert name == "sessions" and [r["title"] for r in data["upsert"]] == ["followed"]
        srv.post_json("/api/session/rename", {"session_id": sid, "title": "renamed"})
        _, _, data = feed.next_event()
        assert [r["title"] for r in data["upsert"]] == ["renamed"]
        srv.post_json("/api/session/delete", {"session_id": sid})
        _, _, data = feed.next_event()
        assert data["remove"] == [sid]
    finally:
        feed.close()


def test_a_feed_resumed_from_an_unknown_number_says_reset(srv):
    feed = Feed(srv, after=10**17)
    try:
        assert feed.next_event()[1] == "reset"
    finally:
        feed.close()


def test_sidebar_pages_cover_every_session_once(srv):
    for n in range(5):
        srv.post_json("/api/session/new", {"title": f"paged {n}"})
    total = srv.get_json("/api/sessions")["total"]
    seen, cursor = [], None
    while True:
        query = "/api/sessions?limit=2" + (f"&cursor={cursor}" if cursor else "")
        data = srv.get_json(query)
        seen += [r["session_id"] for r in data["sessions"]]
        assert ("agent_sessions" in data) is (cursor is None)
        cursor = data["next_cursor"]
        if not cursor:
            break
    assert len(seen) == len(set(seen)) == total


@pytest.mark.parametrize("query", ["limit=0", "limit=x", "limit=100000", "cursor=%21%21", "limit=-1"])
def test_bad_paging_parameters_are_400(srv, query):
    status, data = srv.json("GET", f"/api/sessions?{query}")
    assert status == 400 and "error" in data


# ---------------------------------------------------------------------- clients that read slowly or never

EXPORT_MESSAGES = 60
# ~6 MB of export: far more than the kernel buffers of a socket that reads nothing can take in.
EXPORT_MESSAGE_CHARS = 100_000
NON_READERS = 40


def _import_large_session(srv: ServerProc) -> tuple[str, bytes]:
    """A ~6 MB session imported over HTTP; (its JSON export path, the export read by a normal client)."""
    messages = [
        {"role": ("user", "assistant")[n % 2], "content": (f"message {n} " * 10_000)[:EXPORT_MESSAGE_CHARS]}
        for n in range(EXPORT_MESSAGES)
    ]
    row = srv.post_json("/api/session/import", {"title": "large", "messages": messages})["session"]
    sid = row["session_id"]
    path = f"/api/session/export?session_id={sid}&format=json"
    status, _, body = srv.request("GET", path, timeout=30)
    assert status == 200 and len(body) > EXPORT_MESSAGES * EXPORT_MESSAGE_CHARS
    return path, body


@pytest.fixture(scope="module")
def export_srv(tmp_path_factory):
    """Two request workers, generous write deadlines, one large session: (server, export path, export)."""
    server = ServerProc(
        tmp_path_factory.mktemp("slow_readers"),
        env={
            "TALARIA_SERVER_THREADS": "2",
            "TALARIA_RESPONSE_IDLE_TIMEOUT": "60",
            "TALARIA_RESPONSE_TIMEOUT": "120",
        },
    )
    server.start()
    try:
        path, body = _import_large_session(server)
        yield server, path, body
    finally:
        server.stop()
    assert "Traceback" not in server.log_text(), server.log_text()[-4000:]


def test_clients_that_never_read_a_large_export_leave_the_server_answering(export_srv):
    """Issue 19: 40 sockets that asked for a multi-MB export and read nothing each held a request worker
    for the 60 s write timeout; /health and the sidebar waited behind them for a minute."""
    srv, path, _ = export_srv
    socks: list[socket.socket] = []
    try:
        socks = [request_without_reading(srv, path) for _ in range(NON_READERS)]
        assert wait_until_answers_began(socks, timeout=30), "exports waited for a request worker"
        _answers_promptly(srv, "/health", "/api/sessions?limit=100")
    finally:
        for sock in socks:
            sock.close()


def test_trickle_readers_of_a_large_export_each_receive_it_whole(export_srv):
    srv, path, expected = export_srv
    received: dict[int, bytes] = {}

    def trickle(n: int) -> None:
        with request_without_reading(srv, path, window=65536) as sock:
            sock.settimeout(30)
            received[n], closed = read_all(sock, pause=0.02)
            assert closed

    threads = [threading.Thread(target=trickle, args=(n,), daemon=True) for n in range(8)]
    for thread in threads:
        thread.start()
    while any(thread.is_alive() for thread in threads):
        assert srv.request("GET", "/health", timeout=5)[0] == 200
        time.sleep(0.2)
    for thread in threads:
        thread.join(60)
    assert sorted(received) == list(range(8))
    for raw in received.values():
        head, _, body = raw.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.0 200 ")
        assert body == expected


@pytest.fixture(scope="module")
def tight_srv(tmp_path_factory):
    """Short write deadlines and room for one large response only: (server, export path, export)."""
    server = ServerProc(
        tmp_path_factory.mktemp("tight_writes"),
        env={
            "TALARIA_RESPONSE_IDLE_TIMEOUT": "3",
            "TALARIA_RESPONSE_TIMEOUT": "8",
            "TALARIA_RESPONSE_SPOOL_BYTES": str(EXPORT_MESSAGES * EXPORT_MESSAGE_CHARS * 3 // 2),
        },
    )
    server.start()
    try:
        path, body = _import_large_session(server)
        yield server, path, body
    finally:
        server.stop()
    assert "Traceback" not in server.log_text(), server.log_text()[-4000:]


def test_a_client_that_reads_nothing_is_closed_after_the_idle_write_deadline(tight_srv):
    """Issue 19: a non-reading client held its response (and a worker) for the 60 s write timeout."""
    srv, path, expected = tight_srv
    with request_without_reading(srv, path) as sock:
        assert wait_until_answers_began([sock], timeout=10)
        time.sleep(3 + 2)
        sock.settimeout(10)
        received, closed = read_all(sock, give_up_after=10)
        assert closed and len(received) < len(expected)  # cut off, not served


def test_a_trickle_reader_is_closed_at_the_total_response_deadline(tight_srv):
    srv, path, expected = tight_srv
    with request_without_reading(srv, path) as sock:
        sock.settimeout(10)
        started = time.monotonic()
        # A few KB every 0.2 s: the whole export would take far longer than the 8 s total deadline.
        received, closed = read_all(sock, pause=0.2, give_up_after=8 + 5)
        elapsed = time.monotonic() - started
    assert closed and len(received) < len(expected)
    assert elapsed > 3 + 1  # a slow reader is not idle: the total deadline ended it


def test_past_the_spool_limit_a_large_response_is_503_until_room_returns(tight_srv):
    srv, path, expected = tight_srv
    with request_without_reading(srv, path) as holder:
        assert wait_until_answers_began([holder], timeout=10)
        status, headers, body = srv.request("GET", path, timeout=10)
        _assert_json_error(status, headers, body, 503)
        assert "retry" in json.loads(body)["error"].lower()
        assert headers.get("retry-after")
        assert srv.request("GET", "/health", timeout=5)[0] == 200
    deadline = time.monotonic() + 10
    while (answer := srv.request("GET", path, timeout=10))[0] == 503 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert answer[0] == 200 and answer[2] == expected

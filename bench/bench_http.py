"""HTTP benchmark: the sidebar's latency under load, the way the page asks for it.

``GET /api/sessions?limit=100`` (the page's first request), the whole list, and ``/health``, with N
sessions, C concurrent clients and S chat turns streaming (real hermes-agent against the fake LLM on
127.0.0.1); optionally while idle and trickling sockets, open sidebar feeds and clients that request a
large export and never read it sit on the server. The
clients run in their own process (``bench/loadgen.py``); each line shows the client-observed latency
beside the server's own time (``Server-Timing``: queue = waiting for a request worker, handling = the
route up to the response head).

The floor is the same response bytes served by a bare ``ThreadingHTTPServer`` over the same HTTP/1.0
one-request-per-connection protocol, measured with the same clients: what is left is Talaria's cost.

    .venv/bin/python bench/bench_http.py                            # 2,000 sessions, 50 clients, 4 turns
    .venv/bin/python bench/bench_http.py --idle 60 --trickling 40 --feeds 40 --path /health
    .venv/bin/python bench/bench_http.py --non-readers 100 --export-mb 14 --streams 0
    .venv/bin/python bench/bench_http.py --server-script ../old/server.py   # another checkout, to compare
    .venv/bin/python bench/bench_http.py --streams 16 --workers 2   # the agents in 2 worker processes
    .venv/bin/python bench/bench_http.py --sessions 20000 --messages 4 --streams 32 --corpus /tmp/c20k
        # 20,000 sessions; the folder --corpus names keeps them between runs (made by the first)

Results are printed and written to ``bench/results/bench_http-<unix>.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from talaria_testing.server_proc import ServerProc  # noqa: E402

WORDS = [
    "the",
    "quick",
    "brown",
    "fox",
    "jumps",
    "over",
    "a",
    "lazy",
    "dog",
    "while",
    "seven",
    "wizards",
    "quietly",
    "judge",
    "boxing",
    "matches",
]


def populate(session_dir: Path, count: int, messages: int, *, durable: bool = True) -> None:
    """``count`` sessions of ``messages`` messages each, saved without the index, then one index rebuild.
    Not ``durable``: the same bytes written without the store's fsyncs (a corpus kept for many runs)."""
    import api.models as models
    from api.rules import jsonio

    session_dir.mkdir(parents=True, exist_ok=True)
    models.SESSION_DIR = session_dir
    models.SESSION_INDEX_FILE = session_dir / "_index.json"
    base = time.time() - count * 60
    for i in range(count):
        rows = []
        for k in range(messages):
            text = " ".join(WORDS[(i + k + j) % len(WORDS)] for j in range(40))
            rows.append(
                {
                    "role": "user" if k % 2 == 0 else "assistant",
                    "content": f"{k}: {text}",
                    "timestamp": base + i * 60 + k,
                }
            )
        session = models.Session(
            title=f"Benchmark session {i}",
            messages=rows,
            created_at=base + i * 60,
            updated_at=base + i * 60 + messages,
        )
        if durable:
            session.save(touch_updated_at=False, skip_index=True)
        else:
            session.path.write_bytes(jsonio.dumps_document(session.to_payload()))
    models.store().index.rebuild_index_file(session_dir)


def populate_large(session_dir: Path, megabytes: float) -> str:
    """One session whose JSON export is about ``megabytes`` MB; returns its id."""
    import api.models as models

    session_dir.mkdir(parents=True, exist_ok=True)
    models.SESSION_DIR = session_dir
    models.SESSION_INDEX_FILE = session_dir / "_index.json"
    chars = 100_000
    rows = [
        {
            "role": "user" if k % 2 == 0 else "assistant",
            "content": (f"{k}: " + " ".join(WORDS) + " ") * (chars // 80),
            "timestamp": time.time() - 3600 + k,
        }
        for k in range(max(1, int(megabytes * 1_000_000 / chars)))
    ]
    session = models.Session(title="Large export", messages=rows)
    session.save(skip_index=True)
    return session.session_id


def populate_from_corpus(session_dir: Path, corpus: Path, count: int, messages: int) -> None:
    """The sessions of ``populate`` copied from ``corpus`` (made there on first use), so runs that compare
    checkouts start from the same files without writing thousands of them durably each time."""
    import shutil

    ready = corpus / f"{count}x{messages}"
    if not (ready / "_index.json").exists():
        populate(ready, count, messages, durable=False)
    session_dir.mkdir(parents=True, exist_ok=True)
    for entry in os.scandir(ready):
        if entry.name.endswith(".json"):
            shutil.copy2(entry.path, session_dir / entry.name)  # same mtimes: the index stays valid


def run_loadgen(host: str, port: int, path: str, clients: int, total: int, timeout: float = 30.0) -> dict:
    """``bench/loadgen.py`` in its own process: client-observed latency and the server's own timing."""
    cmd = [
        sys.executable, str(REPO / "bench" / "loadgen.py"), "--host", host, "--port", str(port), "--path", path,
        "--clients", str(clients), "--requests", str(total), "--timeout", str(timeout),
    ]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


@contextlib.contextmanager
def floor_server(body: bytes) -> Iterator[int]:
    """The same bytes from a bare threaded server: the floor for this payload over HTTP/1.0."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"

        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Type", "application/json; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


# ---------------------------------------------------------------------- concurrent streaming turns


def _read_sse_until_done(srv: ServerProc, stream_id: str, stop: threading.Event, stats: dict) -> None:
    conn = http.client.HTTPConnection(srv.host, srv.port, timeout=120)
    try:
        conn.request("GET", f"/api/chat/stream?stream_id={stream_id}")
        resp = conn.getresponse()
        for raw in resp:
            line = raw.decode("utf-8", "replace")
            if line.startswith("event:"):
                stats["events"] += 1
                if line.strip() == "event: done":
                    break
            if stop.is_set():
                break
    finally:
        conn.close()


@contextlib.contextmanager
def streaming_turns(srv: ServerProc, count: int, token_delay: float) -> Iterator[dict]:
    """Keep ``count`` chat turns streaming (each a long scripted reply) until the block ends."""
    stats = {"turns_started": 0, "turns_finished": 0, "events": 0, "errors": []}
    if count <= 0:
        yield stats
        return
    stop = threading.Event()

    def worker(n: int) -> None:
        sid = srv.post_json("/api/session/new", {"title": f"stream {n}"})["session"]["session_id"]
        while not stop.is_set():
            status, data = srv.json(
                "POST", "/api/chat/start", {"session_id": sid, "message": f"tell me a long story {n}"}
            )
            if status != 200:
                stats["errors"].append((status, data))
                time.sleep(0.5)
                continue
            stats["turns_started"] += 1
            _read_sse_until_done(srv, data["stream_id"], stop, stats)
            stats["turns_finished"] += 1

    threads = [threading.Thread(target=worker, args=(n,), daemon=True) for n in range(count)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 120
    # The agent takes a while to start its first turns: measure only once tokens are flowing.
    while (stats["turns_started"] < count or stats["events"] < 20 * count) and time.monotonic() < deadline:
        time.sleep(0.1)
    try:
        yield stats
    finally:
        stop.set()
        for t in threads:
            t.join(30)


def start_fake_llm(root: Path, hermes_home: Path, token_delay: float, replies: int = 400):
    """The fake LLM in its own process (in this one it would compete with the timed clients for the GIL)."""
    from talaria_testing.fake_llm import FakeLLMProcess, Reply, write_hermes_config

    story = " ".join(WORDS[i % len(WORDS)] for i in range(600))
    llm = FakeLLMProcess(root / "fake_llm.port")
    llm.script(*[Reply(text=story, token_delay=token_delay) for _ in range(replies)])
    write_hermes_config(hermes_home, llm.base_url)
    return llm


# ---------------------------------------------------------------------- hostile neighbours


@contextlib.contextmanager
def slow_clients(srv: ServerProc, idle: int, trickling: int, feeds: int) -> Iterator[dict]:
    """``idle`` sockets that send nothing, ``trickling`` ones that send a header byte every second (each
    reopened when the server closes it), and ``feeds`` open sidebar feeds, for as long as the block runs."""
    stats = {"idle": idle, "trickling": trickling, "feeds": feeds, "reopened": 0, "feed_status": {}}
    stop = threading.Event()
    held: list[socket.socket] = []

    def hold_idle() -> None:
        while not stop.is_set():
            sock = socket.create_connection((srv.host, srv.port), timeout=5)
            held.append(sock)
            try:
                sock.settimeout(None)
                while not stop.is_set() and sock.recv(1024):
                    pass
            except OSError:
                pass
            stats["reopened"] += 1

    def trickle() -> None:
        while not stop.is_set():
            sock = socket.create_connection((srv.host, srv.port), timeout=5)
            held.append(sock)
            try:
                for byte in b"GET /health HTTP/1.0\r\nX-Slow: " + b"a" * 100_000:
                    if stop.wait(1.0):
                        return
                    sock.send(bytes([byte]))
            except OSError:
                stats["reopened"] += 1

    def feed() -> None:
        sock = socket.create_connection((srv.host, srv.port), timeout=5)
        held.append(sock)
        sock.sendall(b"GET /api/sessions/feed HTTP/1.0\r\n\r\n")
        status = sock.recv(64).split(b" ")[1].decode()
        stats["feed_status"][status] = stats["feed_status"].get(status, 0) + 1
        sock.settimeout(None)
        try:
            while not stop.is_set() and sock.recv(4096):
                pass
        except OSError:
            pass

    workers = [hold_idle] * idle + [trickle] * trickling + [feed] * feeds
    threads = [threading.Thread(target=w, daemon=True) for w in workers]
    for thread in threads:
        thread.start()
    time.sleep(1.0)
    try:
        yield stats
    finally:
        stop.set()
        for sock in list(held):
            sock.close()
        for thread in threads:
            thread.join(5)


def _tcp_state(sock: socket.socket) -> int:
    """The kernel's TCP state of ``sock`` (1 = established; anything else: the server closed or reset it)."""
    return sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 1)[0]


@contextlib.contextmanager
def non_reading_clients(srv: ServerProc, count: int, path: str, wait_s: float = 60.0) -> Iterator[dict]:
    """``count`` sockets that request ``path`` (valid Host) and never read a byte, each reopened when the
    server closes it, for as long as the block runs; waits up to ``wait_s`` for every answer to begin."""
    stats: dict = {"non_readers": count, "path": path, "answers": {}, "reopened": 0}
    if count <= 0:
        yield stats
        return
    stop = threading.Event()
    held: list[socket.socket] = []
    begun: set[int] = set()
    request = f"GET {path} HTTP/1.0\r\nHost: {srv.host}:{srv.port}\r\n\r\n".encode()

    def hold(n: int) -> None:
        while not stop.is_set():
            try:
                sock = socket.create_connection((srv.host, srv.port), timeout=5)
            except OSError:
                stats["refused_connections"] = stats.get("refused_connections", 0) + 1
                stop.wait(1.0)
                continue
            held.append(sock)
            try:
                sock.sendall(request)
                sock.settimeout(None)  # blocking: a MSG_DONTWAIT peek then returns at once
                seen = False
                while not stop.wait(0.25):
                    if not seen:
                        try:
                            status = sock.recv(12, socket.MSG_PEEK | socket.MSG_DONTWAIT)[9:12].decode()
                        except BlockingIOError:
                            status = ""
                        if status:
                            seen = True
                            begun.add(n)
                            stats["answers"][status] = stats["answers"].get(status, 0) + 1
                    if _tcp_state(sock) != 1:
                        stats["reopened"] += 1
                        break
            except OSError:
                stats["reopened"] += 1
            finally:
                sock.close()

    threads = [threading.Thread(target=hold, args=(n,), daemon=True) for n in range(count)]
    for thread in threads:
        thread.start()
    started = time.monotonic()
    while len(begun) < count and time.monotonic() - started < wait_s:
        time.sleep(0.25)
    stats["answers_begun_s"] = round(time.monotonic() - started, 1)
    stats["answers_begun"] = len(begun)
    try:
        yield stats
    finally:
        stop.set()
        for thread in threads:
            thread.join(5)
        for sock in list(held):
            sock.close()


class ScriptServer(ServerProc):
    """The server started from another ``server.py`` (another checkout), for before/after comparisons."""

    def __init__(self, root: Path, script: Path, **kw):
        super().__init__(root, **kw)
        self.script = script

    def command(self) -> list[str]:
        return [sys.executable, str(self.script), "--host", self.host, "--port", "0", *self.args]


# ---------------------------------------------------------------------- main


def _row(name: str, m: dict) -> str:
    return (
        f"  {name:<8} client p50 {m['client_p50_ms']} ms  p99 {m['client_p99_ms']} ms  max {m['client_max_ms']} ms"
        f" | server handling p50 {m['server_app_p50_ms']} ms  p99 {m['server_app_p99_ms']} ms"
        f"  queue p99 {m['server_queue_p99_ms']} ms | {m['req_per_s']} req/s  {m['bytes']} B  errors {m['errors']}"
        + (f" (p99 counting failures {m['client_p99_all_ms']} ms)" if m["errors"] else "")
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sessions", type=int, default=2000)
    parser.add_argument("--messages", type=int, default=20, help="messages per session")
    parser.add_argument("--clients", type=int, default=50, help="concurrent clients")
    parser.add_argument("--requests", type=int, default=3000, help="total timed requests per path")
    parser.add_argument("--streams", type=int, default=4, help="chat turns streaming during the measurement")
    parser.add_argument("--token-delay", type=float, default=0.01, help="seconds between fake LLM tokens")
    parser.add_argument(
        "--path", action="append", help="paths to time (default: the sidebar page, the full list, /health)"
    )
    parser.add_argument("--idle", type=int, default=0, help="idle sockets held open meanwhile")
    parser.add_argument("--trickling", type=int, default=0, help="sockets trickling a header meanwhile")
    parser.add_argument("--feeds", type=int, default=0, help="sidebar feeds held open meanwhile")
    parser.add_argument(
        "--non-readers", type=int, default=0, help="clients that request a large export and never read it"
    )
    parser.add_argument("--export-mb", type=float, default=14.0, help="size of that export (MB)")
    parser.add_argument(
        "--timeout", type=float, default=30.0, help="seconds before a request counts as failed"
    )
    parser.add_argument(
        "--workers", type=int, default=0, help="agent worker processes (TALARIA_AGENT_WORKERS; 0 = threads)"
    )
    parser.add_argument("--server-script", type=Path, help="another checkout's server.py, to compare with")
    parser.add_argument("--no-floor", action="store_true", help="skip the bare-server floor")
    parser.add_argument("--keep", action="store_true", help="keep the temp state folder")
    parser.add_argument("--corpus", type=Path, help="a folder keeping the populated sessions between runs")
    args = parser.parse_args(argv)
    paths = args.path or ["/api/sessions?limit=100", "/api/sessions", "/health"]

    root = Path(tempfile.mkdtemp(prefix="talaria-bench-http-"))
    env = {
        "TALARIA_SERVER_THREADS": str(max(32, args.clients + 2 * args.streams + 4)),
        "TALARIA_AGENT_WORKERS": str(args.workers),
    }
    srv = ScriptServer(root, args.server_script, env=env) if args.server_script else ServerProc(root, env=env)
    t0 = time.perf_counter()
    large = populate_large(srv.session_dir, args.export_mb) if args.non_readers else None
    if args.corpus:
        populate_from_corpus(srv.session_dir, args.corpus, args.sessions, args.messages)
    else:
        populate(srv.session_dir, args.sessions, args.messages)
    populate_s = time.perf_counter() - t0
    llm = start_fake_llm(root, srv.hermes_home, args.token_delay) if args.streams else None
    result: dict = {
        "sessions": args.sessions,
        "messages_per_session": args.messages,
        "clients": args.clients,
        "populate_s": round(populate_s, 2),
        "server": str(args.server_script or "this checkout"),
        "agent_workers": args.workers,
        "paths": {},
    }
    bodies: dict[str, bytes] = {}
    try:
        srv.start()
        for path in paths:
            bodies[path] = srv.request("GET", path)[2]
        with (
            streaming_turns(srv, args.streams, args.token_delay) as stream_stats,
            slow_clients(srv, args.idle, args.trickling, args.feeds) as slow_stats,
            non_reading_clients(
                srv, args.non_readers, f"/api/session/export?session_id={large}&format=json"
            ) as non_reader_stats,
        ):
            for path in paths:
                result["paths"][path] = {
                    "talaria": run_loadgen(
                        srv.host, srv.port, path, args.clients, args.requests, args.timeout
                    )
                }
        result["streams"] = {k: v for k, v in stream_stats.items() if k != "errors"}
        result["streams"]["errors"] = stream_stats["errors"][:5]
        result["slow_clients"] = slow_stats
        result["non_readers"] = non_reader_stats
        if not args.no_floor:
            for path in paths:
                with floor_server(bodies[path]) as port:
                    result["paths"][path]["floor"] = run_loadgen(
                        "127.0.0.1", port, path, args.clients, args.requests, args.timeout
                    )
    finally:
        srv.stop()
        if llm is not None:
            llm.stop()
        if not args.keep:
            import shutil

            shutil.rmtree(root, ignore_errors=True)
    out_dir = REPO / "bench" / "results"
    out_dir.mkdir(exist_ok=True)
    out = out_dir / f"bench_http-{int(time.time())}.json"
    out.write_text(json.dumps(result, indent=2))
    print(
        f"{args.sessions} sessions, {args.clients} clients, {args.requests} requests per path, "
        f"{args.streams} turns streaming, {args.idle} idle + {args.trickling} trickling sockets, "
        f"{args.feeds} open feeds, {args.non_readers} non-readers of a {args.export_mb:g} MB export; "
        f"server: {result['server']}"
    )
    if args.non_readers:
        print(f"  non-readers {result['non_readers']}")
    failed = 0
    for path, measured in result["paths"].items():
        print(f"GET {path}")
        print(_row("talaria", measured["talaria"]))
        if "floor" in measured:
            print(_row("floor", measured["floor"]))
        failed += measured["talaria"]["errors"]
    print(f"  streams {result['streams']}")
    print(f"  populate {populate_s:.1f} s; results in {out.relative_to(REPO)}")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    # The server this starts reads its settings from these: never the person's real ~/.hermes.
    os.environ["HERMES_HOME"] = tempfile.mkdtemp(prefix="talaria-bench-home-")
    os.environ["HERMES_WEBUI_STATE_DIR"] = tempfile.mkdtemp(prefix="talaria-bench-state-")
    sys.exit(main())

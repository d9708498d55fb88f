"""HTTP benchmark: ``GET /api/sessions`` latency (p50/p99) with N sessions and C concurrent clients,
optionally while S chat turns stream (real hermes-agent against the fake LLM on 127.0.0.1).

The floor is the same response bytes served by a bare ``ThreadingHTTPServer`` over the same HTTP/1.0
one-request-per-connection protocol, measured with the same clients: what is left is Talaria's cost.

    .venv/bin/python bench/bench_http.py                       # 2,000 sessions, 8 clients
    .venv/bin/python bench/bench_http.py --streams 4           # ... while 4 turns stream
    .venv/bin/python bench/bench_http.py --sessions 500 --clients 1 --requests 300

Results are printed and written to ``bench/results/bench_http-<unix>.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import statistics
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


def populate(session_dir: Path, count: int, messages: int) -> None:
    """``count`` sessions of ``messages`` messages each, saved without the index, then one index rebuild."""
    import api.models as models
    from api import session_index

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
        session.save(touch_updated_at=False, skip_index=True)
    session_index.rebuild_index_file(session_dir)


def fetch(host: str, port: int, path: str) -> tuple[float, int, int]:
    """(seconds, status, body bytes) of one GET on a fresh connection."""
    started = time.perf_counter()
    conn = http.client.HTTPConnection(host, port, timeout=60)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        body = resp.read()
    finally:
        conn.close()
    return time.perf_counter() - started, resp.status, len(body)


def measure(host: str, port: int, path: str, clients: int, total: int, warmup: int = 20) -> dict:
    for _ in range(warmup):
        fetch(host, port, path)
    latencies: list[float] = []
    sizes: set[int] = set()
    errors: list[int] = []
    lock = threading.Lock()
    per_client = max(1, total // clients)

    def client() -> None:
        for _ in range(per_client):
            seconds, status, size = fetch(host, port, path)
            with lock:
                latencies.append(seconds)
                sizes.add(size)
                if status != 200:
                    errors.append(status)

    threads = [threading.Thread(target=client) for _ in range(clients)]
    wall = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - wall
    latencies.sort()

    def pct(p: float) -> float:
        return round(latencies[min(len(latencies) - 1, int(p / 100 * len(latencies)))] * 1000, 2)

    return {
        "requests": len(latencies),
        "clients": clients,
        "p50_ms": pct(50),
        "p90_ms": pct(90),
        "p99_ms": pct(99),
        "max_ms": round(latencies[-1] * 1000, 2),
        "mean_ms": round(statistics.fmean(latencies) * 1000, 2),
        "req_per_s": round(len(latencies) / wall, 1),
        "bytes": max(sizes) if sizes else 0,
        "errors": len(errors),
    }


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


def _read_sse_until_done(srv: ServerProc, stream_id: str, stop: threading.Event) -> int:
    conn = http.client.HTTPConnection(srv.host, srv.port, timeout=120)
    events = 0
    try:
        conn.request("GET", f"/api/chat/stream?stream_id={stream_id}")
        resp = conn.getresponse()
        for raw in resp:
            line = raw.decode("utf-8", "replace")
            if line.startswith("event:"):
                events += 1
                if line.strip() == "event: done":
                    break
            if stop.is_set():
                break
    finally:
        conn.close()
    return events


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
            stats["events"] += _read_sse_until_done(srv, data["stream_id"], stop)
            stats["turns_finished"] += 1

    threads = [threading.Thread(target=worker, args=(n,), daemon=True) for n in range(count)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 60
    while stats["turns_started"] < count and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(1.0)  # let the tokens flow
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


# ---------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sessions", type=int, default=2000)
    parser.add_argument("--messages", type=int, default=20, help="messages per session")
    parser.add_argument("--clients", type=int, default=8, help="concurrent clients")
    parser.add_argument("--requests", type=int, default=2000, help="total timed requests")
    parser.add_argument("--streams", type=int, default=0, help="chat turns streaming during the measurement")
    parser.add_argument("--token-delay", type=float, default=0.01, help="seconds between fake LLM tokens")
    parser.add_argument("--path", default="/api/sessions")
    parser.add_argument("--keep", action="store_true", help="keep the temp state folder")
    args = parser.parse_args(argv)

    root = Path(tempfile.mkdtemp(prefix="talaria-bench-http-"))
    srv = ServerProc(root, env={"TALARIA_SERVER_THREADS": str(max(32, args.clients + 2 * args.streams + 4))})
    t0 = time.perf_counter()
    populate(srv.session_dir, args.sessions, args.messages)
    populate_s = time.perf_counter() - t0
    llm = start_fake_llm(root, srv.hermes_home, args.token_delay) if args.streams else None
    result: dict = {
        "sessions": args.sessions,
        "messages_per_session": args.messages,
        "populate_s": round(populate_s, 2),
        "path": args.path,
    }
    try:
        srv.start()
        _, _, body = srv.request("GET", args.path)
        with streaming_turns(srv, args.streams, args.token_delay) as stream_stats:
            result["talaria"] = measure(srv.host, srv.port, args.path, args.clients, args.requests)
        if args.streams:
            result["streams"] = {
                "count": args.streams,
                **{k: v for k, v in stream_stats.items() if k != "errors"},
            }
            result["streams"]["errors"] = stream_stats["errors"][:5]
        with floor_server(body) as port:
            result["floor"] = measure("127.0.0.1", port, args.path, args.clients, args.requests)
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
    t, f = result["talaria"], result["floor"]
    print(
        f"GET {args.path}: {args.sessions} sessions, {args.clients} clients, {t['requests']} requests, {t['bytes']} bytes"
        + (f", while {args.streams} turns stream" if args.streams else "")
    )
    print(
        f"  talaria p50 {t['p50_ms']} ms  p99 {t['p99_ms']} ms  max {t['max_ms']} ms  {t['req_per_s']} req/s  errors {t['errors']}"
    )
    print(
        f"  floor   p50 {f['p50_ms']} ms  p99 {f['p99_ms']} ms  max {f['max_ms']} ms  {f['req_per_s']} req/s"
    )
    if args.streams:
        print(f"  streams {result['streams']}")
    print(f"  populate {populate_s:.1f} s; results in {out.relative_to(REPO)}")
    return 0 if t["errors"] == 0 else 1


if __name__ == "__main__":
    # api.config reads these at import (populate() imports it): never the person's real ~/.hermes.
    os.environ["HERMES_HOME"] = tempfile.mkdtemp(prefix="talaria-bench-home-")
    os.environ["HERMES_WEBUI_STATE_DIR"] = tempfile.mkdtemp(prefix="talaria-bench-state-")
    sys.exit(main())

"""Benchmark: the sidebar list under streaming load, and the latency the SSE relay adds to each token.

The real server runs as a subprocess over a state folder of 2,000 sessions; the real hermes-agent in it
talks to a fake LLM in this process that streams slowly (``token_delay``). Measured:

1. ``GET /api/sessions`` latency (p50, p99), idle and while 4 turns stream at once.
2. The SSE relay: the time from the fake LLM writing a token to its socket to an SSE client here
   reading that token (one turn alone, and each of the 4 concurrent turns). Every token text is
   unique, so the send time recorded by the fake's handler pairs with the read time of the client.

Each figure is the median over ``--runs`` runs.

    .venv/bin/python bench/bench_chat.py [--sessions 2000] [--runs 5] [--tokens 300] [--token-delay 0.01]
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing
import re
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from talaria_testing import fake_llm  # noqa: E402
from talaria_testing.fake_llm import FakeLLM, Reply, agent_server  # noqa: E402
from talaria_testing.server_proc import ServerProc  # noqa: E402

STREAMS = 4
_TOKEN = re.compile(rb'"content": "(r\d+t\d+ )"')


# ---------------------------------------------------------------------- send times in the fake


class _Stamped:
    """The fake's socket writer, noting when each token chunk has been written."""

    def __init__(self, raw, sent: dict[str, float], clock=time.perf_counter):
        self._raw = raw
        self._sent = sent
        self._clock = clock

    def write(self, data: bytes) -> int:
        n = self._raw.write(data)
        match = _TOKEN.search(data)
        if match:
            self._sent[match.group(1).decode()] = self._clock()
        return n

    def __getattr__(self, name):
        return getattr(self._raw, name)


def timed_fake(sent: dict[str, float], clock=time.perf_counter) -> FakeLLM:
    """A fake LLM noting, in ``sent``, the ``clock()`` time each token chunk was written to its socket."""

    class Handler(fake_llm._Handler):
        def setup(self):
            super().setup()
            self.wfile = _Stamped(self.wfile, sent, clock)

    fake = FakeLLM()
    fake._server.RequestHandlerClass = Handler  # the fake has no hook for send times; the bench adds one
    return fake


_REPLY_SERIAL = iter(range(10**9))


def reply(tokens: int, delay: float) -> Reply:
    serial = next(_REPLY_SERIAL)
    return Reply(text="".join(f"r{serial}t{i} " for i in range(tokens)), token_delay=delay)


# ---------------------------------------------------------------------- corpus and client


def build_corpus(folder: Path, sessions: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    t0 = 1.75e9
    for k in range(sessions):
        sid = f"bench{k:05d}"
        messages = [
            {
                "role": "user" if i % 2 == 0 else "assistant",
                "content": f"session {k} message {i} "
                + "lorem ipsum dolor sit amet " * (4 if i % 2 == 0 else 30),
                "timestamp": t0 + k * 60 + i,
            }
            for i in range(8)
        ]
        doc = {
            "session_id": sid,
            "title": f"Bench session {k}",
            "created_at": t0 + k * 60,
            "updated_at": t0 + k * 60 + 8,
            "messages": messages,
            "context_messages": messages,
        }
        (folder / f"{sid}.json").write_bytes(orjson.dumps(doc))


class Reader(threading.Thread):
    """Reads one turn's SSE stream, noting when each token arrived."""

    def __init__(self, srv: ServerProc, stream_id: str):
        super().__init__(daemon=True)
        self.srv = srv
        self.stream_id = stream_id
        self.received: dict[str, float] = {}
        self.first_token = threading.Event()
        self.done = threading.Event()
        self.names: list[str] = []

    def run(self) -> None:
        conn = http.client.HTTPConnection(self.srv.host, self.srv.port, timeout=120)
        try:
            conn.request("GET", f"/api/chat/stream?stream_id={self.stream_id}")
            resp = conn.getresponse()
            name = None
            while True:
                line = resp.readline()
                if not line:
                    break
                if line.startswith(b"event: "):
                    name = line[7:].strip().decode()
                    self.names.append(name)
                elif line.startswith(b"data: ") and name == "token":
                    now = time.perf_counter()
                    self.received[json.loads(line[6:])["text"]] = now
                    self.first_token.set()
        finally:
            conn.close()
            self.done.set()


def start_turn(srv: ServerProc, sid: str, text: str) -> Reader:
    stream_id = srv.post_json("/api/chat/start", {"session_id": sid, "message": text})["stream_id"]
    reader = Reader(srv, stream_id)
    reader.start()
    return reader


def list_latencies(host: str, port: int, count: int | None = None, stop=None) -> list[float]:
    """Sequential ``GET /api/sessions`` on one keep-alive connection, ``count`` times or until ``stop``."""
    out = []
    conn = http.client.HTTPConnection(host, port, timeout=60)
    try:
        while (count is None or len(out) < count) and (stop is None or not stop.is_set()):
            started = time.perf_counter()
            conn.request("GET", "/api/sessions")
            resp = conn.getresponse()
            resp.read()
            out.append(time.perf_counter() - started)
            assert resp.status == 200
    finally:
        conn.close()
    return out


def _list_worker(host: str, port: int, go, stop, results) -> None:
    go.wait()
    results.put(list_latencies(host, port, stop=stop))


class ListLoad:
    """The list client in its own process, so its reads do not delay this process's SSE readers."""

    def __init__(self, srv: ServerProc):
        ctx = multiprocessing.get_context("spawn")
        self.go, self.stop = ctx.Event(), ctx.Event()
        self.results = ctx.Queue()
        args = (srv.host, srv.port, self.go, self.stop, self.results)
        self.proc = ctx.Process(target=_list_worker, args=args, daemon=True)
        self.proc.start()

    def finish(self) -> list[float]:
        self.stop.set()
        out = self.results.get(timeout=60)
        self.proc.join(10)
        return out


def relay_delays(sent: dict[str, float], readers: list[Reader]) -> list[float]:
    return [t - sent[tok] for r in readers for tok, t in r.received.items() if tok in sent]


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))]


# ---------------------------------------------------------------------- one run


def one_run(srv, fake, sent, sids, opts) -> dict:
    sent.clear()
    idle = list_latencies(srv.host, srv.port, count=opts.idle_requests)

    fake.script(reply(opts.tokens, opts.token_delay))
    alone = start_turn(srv, sids[0], "relay alone")
    alone.join(120)
    alone_delays = relay_delays(sent, [alone])

    sent.clear()
    load = ListLoad(srv)
    fake.script(*[reply(opts.tokens, opts.token_delay) for _ in range(STREAMS)])
    readers = [start_turn(srv, sid, f"stream {i}") for i, sid in enumerate(sids)]
    for r in readers:
        r.first_token.wait(60)
    load.go.set()  # the list is measured while all the turns stream
    while not any(r.done.is_set() for r in readers):
        time.sleep(0.005)
    loaded = load.finish()
    for r in readers:
        r.join(120)
        assert "done" in r.names and "error" not in r.names, r.names
    loaded_delays = relay_delays(sent, readers)
    return {"idle": idle, "loaded": loaded, "alone": alone_delays, "concurrent": loaded_delays}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--tokens", type=int, default=300, help="tokens per streamed reply")
    parser.add_argument("--token-delay", type=float, default=0.01, help="seconds between tokens in the fake")
    parser.add_argument("--idle-requests", type=int, default=100)
    opts = parser.parse_args(argv)

    sent: dict[str, float] = {}
    fake = timed_fake(sent).start()
    with tempfile.TemporaryDirectory(prefix="talaria-bench-chat-") as tmp:
        srv = agent_server(Path(tmp), fake.base_url)
        build_corpus(srv.session_dir, opts.sessions)
        srv.start()
        try:
            status, _, body = srv.request("GET", "/api/sessions")
            listed = json.loads(body)["sessions"]
            sids = [srv.post_json("/api/session/new", {})["session"]["session_id"] for _ in range(STREAMS)]
            for sid in sids:  # warm up: import the agent, build and cache one agent per session
                fake.script(Reply(text="warm"))
                r = start_turn(srv, sid, "warm up")
                r.join(120)
            runs = [one_run(srv, fake, sent, sids, opts) for _ in range(opts.runs)]
        finally:
            srv.stop()
            fake.stop()

    def med(key: str, q: float) -> float:
        return statistics.median(pct(run[key], q) for run in runs) * 1000

    def count(key: str) -> int:
        return int(statistics.median(len(run[key]) for run in runs))

    print(f"sessions listed: {len(listed)} ({len(body) / 1e6:.1f} MB); {opts.runs} runs; replies of {opts.tokens} tokens, "
          f"token_delay {opts.token_delay * 1000:.0f} ms; medians over runs")  # fmt: skip
    print(f"{'measure':<46} {'n/run':>6} {'p50 ms':>8} {'p99 ms':>8}")
    rows = [
        ("GET /api/sessions, idle", "idle"),
        (f"GET /api/sessions, {STREAMS} turns streaming", "loaded"),
        ("SSE relay added latency, 1 turn", "alone"),
        (f"SSE relay added latency, {STREAMS} turns + list load", "concurrent"),
    ]
    for label, key in rows:
        print(f"{label:<46} {count(key):>6} {med(key, 50):>8.2f} {med(key, 99):>8.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

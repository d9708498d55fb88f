"""Benchmark: many agent turns streaming at once — is the page still instant, and is every turn saved whole?

The real server and agent with ``--sessions`` sessions (and one of ``--long-messages`` messages), the fake
LLM in its own process answering every turn at ``--rate`` tokens/s: a first answer with a tool call
(hermes-agent's ``todo`` tool runs), then, after the tool's result, a second answer. ``--turns`` turns
stream at once, each followed by an SSE reader; meanwhile the load generator (``bench/loadgen.py``, its
own process) times ``GET /api/sessions?limit=100`` (the sidebar page), ``/health`` and opening the long
session as the page does (its last 100 messages, ``&msg_limit=100``) and whole (``GET /api/session?session_id=…``), and Debian's Chromium (Playwright) runs one more turn in
the page: the token-to-visible latency is the time from the fake LLM writing a token to the page
showing it (both read the same wall clock). The CPU of the server process and of any process under it
(agent workers, if turns run there) is divided by the tokens the readers received.

``--check-saved`` instead starts ``--turns`` turns at once (one per session, e.g. ``--turns 64``),
waits for them all and checks that each session file holds the turn whole (user message, the answer
with its tool call, the tool's result, the final answer, in order); a start the server refuses is
counted with its error, which must name a limit.

Figures are medians over ``--runs`` runs; ``--quick`` makes each run short enough for a laptop.

    .venv/bin/python bench/bench_many_turns.py --quick                  # 32 turns, 3 short runs
    .venv/bin/python bench/bench_many_turns.py --runs 3                 # 32 turns, longer runs
    .venv/bin/python bench/bench_many_turns.py --turns 64 --check-saved # every turn saved whole
    .venv/bin/python bench/bench_many_turns.py --quick --workers 2      # the agents in 2 worker processes
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from bench_http import WORDS, populate, populate_from_corpus, run_loadgen  # noqa: E402
from loadgen import percentile  # noqa: E402
from proc_cpu import tree_cpu_seconds  # noqa: E402

TODO_ARGS = {"todos": [{"id": "1", "content": "measure the stream", "status": "in_progress"}]}
PROBE = "probe"  # the message of the turn the browser times
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run"]


def words(seed: str, count: int) -> str:
    start = sum(map(ord, seed))
    return " ".join(WORDS[(start + i) % len(WORDS)] for i in range(count))


def answers_for(user_text: str, tokens: int) -> tuple[str, str]:
    """The two answers of a turn asked ``user_text``: before the tool call and after its result."""
    half = max(tokens // 2, 1)
    return (
        f"Working on {user_text}: {words(user_text, half)}",
        f"Done with {user_text}: {words(user_text[::-1], half)}",
    )


def probe_text(tokens: int) -> str:
    return " ".join(f"v{i:04d}" for i in range(tokens))


# ---------------------------------------------------------------------- the fake LLM (its own process)


def serve_llm(port_file: Path, rate: float, tokens: int, probe_tokens: int, probe_log: Path) -> None:
    """The fake LLM's policy for this bench; logs when each token of the probe turn is written."""
    from talaria_testing.fake_llm_server import FakeLLM, Reply, _Handler, last_user_text

    delay = 1.0 / rate

    def reply(body: dict) -> Reply:
        user = last_user_text(body) or ""
        messages = body.get("messages") or []
        if user == PROBE:
            return Reply(text=probe_text(probe_tokens), token_delay=delay)
        first, second = answers_for(user, tokens)
        if messages and isinstance(messages[-1], dict) and messages[-1].get("role") == "tool":
            return Reply(text=second, token_delay=delay)
        return Reply(text=first, tool_calls=[{"name": "todo", "arguments": TODO_ARGS}], token_delay=delay)

    log = probe_log.open("a", buffering=1)

    class Timed(_Handler):
        def _stream(self, body: dict, reply: Reply) -> None:
            if reply.text.startswith("v0000"):
                raw = self.wfile

                class Stamp:
                    def write(self, data: bytes) -> int:
                        sent = raw.write(data)
                        raw.flush()
                        if b'"content": "v' in data:
                            word = json.loads(data[6:])["choices"][0]["delta"]["content"].strip()
                            log.write(f"{word} {time.time():.4f}\n")
                        return sent

                    def flush(self) -> None:
                        raw.flush()

                self.wfile = Stamp()  # type: ignore[assignment]
                try:
                    super()._stream(body, reply)
                finally:
                    self.wfile = raw
                return
            super()._stream(body, reply)

    fake = FakeLLM(default_reply=reply)
    fake._server.RequestHandlerClass = Timed
    fake.start()
    port_file.write_text(str(fake.port))
    try:
        while True:
            time.sleep(3600)
    finally:
        fake.stop()


class LLMProcess:
    def __init__(self, root: Path, rate: float, tokens: int, probe_tokens: int):
        self.port_file = root / "llm.port"
        self.probe_log = root / "probe.log"
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--serve-llm", str(self.port_file), "--rate", str(rate)]
            + [
                "--tokens",
                str(tokens),
                "--probe-tokens",
                str(probe_tokens),
                "--probe-log",
                str(self.probe_log),
            ]
        )
        deadline = time.monotonic() + 20
        while not self.port_file.exists() or not self.port_file.read_text():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("the fake LLM did not start")
            time.sleep(0.05)
        self.base_url = f"http://127.0.0.1:{int(self.port_file.read_text())}/v1"

    def emitted(self) -> dict[str, float]:
        if not self.probe_log.exists():
            return {}
        return dict(
            (w, float(t)) for w, t in (line.split() for line in self.probe_log.read_text().splitlines())
        )

    def __enter__(self) -> LLMProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


# ---------------------------------------------------------------------- the server and its turns


def populate_long(session_dir: Path, messages: int) -> str:
    """One session of ``messages`` messages (the one the clients open); returns its id."""
    import api.models as models
    from api import config

    config.configure_from_environment()  # now, not at the first save, which would rebind the folder
    models.SESSION_DIR = session_dir
    models.SESSION_INDEX_FILE = session_dir / "_index.json"
    session_dir.mkdir(parents=True, exist_ok=True)
    base = time.time() - messages
    rows = [
        {
            "role": "user" if k % 2 == 0 else "assistant",
            "content": f"{k}: {words(str(k), 40)}",
            "timestamp": base + k,
        }
        for k in range(messages)
    ]
    session = models.Session(title="A long session", messages=rows)
    session.save()
    return session.session_id


def read_turn(
    port: int, stream_id: str, counts: dict, stop: threading.Event | None = None, who: str = ""
) -> str:
    """Follows one turn's SSE stream to its end; counts its tokens (and notes ``who`` got some in
    ``counts["streaming"]``); returns the last event's name.

    A ``token`` event may carry several of the model's tokens (a worker sends those that arrive within a
    few milliseconds as one): the fake LLM's tokens are its words, so the words of each event are counted.
    """
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    name = ""
    try:
        conn.request("GET", f"/api/chat/stream?stream_id={stream_id}")
        for raw in conn.getresponse():
            if raw.startswith(b"event: "):
                name = raw[7:].strip().decode()
                if name in ("done", "error") or (stop is not None and stop.is_set()):
                    break
            elif name == "token" and raw.startswith(b"data: "):
                counts["tokens"] += len(json.loads(raw[6:])["text"].split())
                counts["events"] = counts.get("events", 0) + 1
                if who:
                    counts["streaming"].add(who)
    finally:
        conn.close()
    return name


def start_turn(srv, sid: str, message: str) -> tuple[int, dict]:
    return srv.json("POST", "/api/chat/start", {"session_id": sid, "message": message})


def keep_streaming(srv, sids: list[str], counts: dict, stop: threading.Event) -> list[threading.Thread]:
    """One thread per session starting turn after turn until ``stop``."""

    def loop(n: int, sid: str) -> None:
        k = 0
        while not stop.is_set():
            status, data = start_turn(srv, sid, f"session {n} turn {k}")
            k += 1
            if status != 200:
                counts["refused"].append(data.get("error"))
                time.sleep(0.5)
                continue
            counts["started"] += 1
            read_turn(srv.port, data["stream_id"], counts, stop, sid)

    threads = [threading.Thread(target=loop, args=(n, sid), daemon=True) for n, sid in enumerate(sids)]
    for t in threads:
        t.start()
    return threads


def visible_latency(base_url: str, sid: str, llm: LLMProcess, tokens: int) -> list[float]:
    """Runs the probe turn in Chromium; per token, ms from the fake LLM writing it to the page showing it."""
    from playwright.sync_api import sync_playwright

    watch = """() => {
        window.__seen = {};
        const mark = () => {
            const live = document.querySelector('.msg.live');
            if (!live) return;
            const now = Date.now();
            for (const word of live.textContent.match(/v\\d{4}/g) || []) {
                if (!(word in window.__seen)) window.__seen[word] = now;
            }
        };
        new MutationObserver(mark).observe(document.body, {subtree: true, childList: true, characterData: true});
    }"""
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 800})
            page.set_default_timeout(180_000)  # the page loads while 32 turns stream
            page.goto(f"{base_url}/#/s/{sid}")
            page.wait_for_selector("#composer-input")
            page.evaluate(watch)
            page.locator("#composer-input").fill(PROBE)
            page.locator("#composer-input").press("Enter")
            last = f"v{tokens - 1:04d}"
            page.wait_for_function(f"() => '{last}' in (window.__seen || {{}})", timeout=120_000)
            seen = page.evaluate("() => window.__seen")
        finally:
            browser.close()
    emitted = llm.emitted()
    return [(seen[w] / 1000 - emitted[w]) * 1000 for w in seen if w in emitted]


def load_run(opts, root: Path, llm: LLMProcess) -> dict:
    from talaria_testing.fake_llm import agent_server

    threads_needed = 3 * opts.turns + opts.clients + 16
    srv = agent_server(
        root / "srv",
        llm.base_url,
        toolsets="todo",
        env={"TALARIA_SERVER_THREADS": str(threads_needed), "TALARIA_AGENT_WORKERS": str(opts.workers)},
    )
    if opts.corpus:
        populate_from_corpus(srv.session_dir, opts.corpus, opts.sessions, opts.messages)
    else:
        populate(srv.session_dir, opts.sessions, opts.messages)
    long_sid = populate_long(srv.session_dir, opts.long_messages)
    counts: dict = {"tokens": 0, "started": 0, "refused": [], "streaming": set()}
    stop = threading.Event()
    result: dict = {}
    streams: list[threading.Thread] = []
    srv.start()
    try:
        assert srv.proc is not None
        warm = srv.post_json("/api/session/new", {})["session"]["session_id"]
        read_turn(
            srv.port,
            srv.post_json("/api/chat/start", {"session_id": warm, "message": "warm"})["stream_id"],
            counts,
        )
        sids = [srv.post_json("/api/session/new", {})["session"]["session_id"] for _ in range(opts.turns)]
        probe_sid = srv.post_json("/api/session/new", {})["session"]["session_id"]
        streams = keep_streaming(srv, sids, counts, stop)
        # The first turn of each session builds its agent (seconds of CPU each): measure once all stream.
        deadline = time.monotonic() + 600
        while len(counts["streaming"]) < opts.turns and time.monotonic() < deadline:
            time.sleep(0.2)
        result["ramp_s"] = round(600 - (deadline - time.monotonic()), 1)
        counts["streaming"].clear()
        while len(counts["streaming"]) < opts.turns and time.monotonic() < deadline:
            time.sleep(0.2)  # and once more: by then every session's next turn is under way too
        # CPU first, with nothing but the streams running: the timed requests below cost CPU of their own.
        tokens0, (own0, kids0), t0 = counts["tokens"], tree_cpu_seconds(srv.proc.pid), time.monotonic()
        events0 = counts.get("events", 0)
        time.sleep(opts.cpu_window)
        tokens1, (own1, kids1), t1 = counts["tokens"], tree_cpu_seconds(srv.proc.pid), time.monotonic()
        streamed = max(tokens1 - tokens0, 1)
        result["cpu"] = {
            "server_ms_per_1k": (own1 - own0) * 1e6 / streamed,
            "children_ms_per_1k": (kids1 - kids0) * 1e6 / streamed,
            "tokens_per_s": streamed / (t1 - t0),
            "tokens_per_event": streamed / max(counts.get("events", 0) - events0, 1),
        }
        paths = {
            "sidebar": "/api/sessions?limit=100",
            "health": "/health",
            # As the page opens a session: its last 100 messages (static/js/chat.js PAGE_SIZE), then all of them.
            "open_page": f"/api/session?session_id={long_sid}&msg_limit=100",
            "open_long": f"/api/session?session_id={long_sid}",
        }
        for key, path in paths.items():
            result[key] = run_loadgen(srv.host, srv.port, path, opts.clients, opts.requests)
        try:
            latencies = visible_latency(srv.base_url, probe_sid, llm, opts.probe_tokens)
        except Exception as exc:  # noqa: BLE001 - the other figures of the run still count
            print(f"token-to-visible not measured: {type(exc).__name__}: {str(exc)[:200]}", flush=True)
            latencies = []
        result["visible"] = {
            "p50_ms": percentile(latencies, 50),
            "p99_ms": percentile(latencies, 99),
            "tokens": len(latencies),
        }
        result["refused"] = counts["refused"][:5]
    finally:
        stop.set()
        for t in streams:
            t.join(60)
        srv.stop()
    return result


# ---------------------------------------------------------------------- every turn saved whole


def saved_whole(session_file: Path, user_text: str, tokens: int) -> str | None:
    """None when the file holds the turn asked ``user_text`` whole, else what is wrong."""
    rows = json.loads(session_file.read_text())["messages"]
    first, second = answers_for(user_text, tokens)
    shape = [(m.get("role"), m.get("content") if m.get("role") != "tool" else None) for m in rows]
    expected = [("user", user_text), ("assistant", first), ("tool", None), ("assistant", second)]
    if shape != expected:
        return f"{session_file.name}: {shape!r}"
    if not rows[1].get("tool_calls"):
        return f"{session_file.name}: the answer lost its tool call"
    return None


def check_run(opts, root: Path, llm: LLMProcess) -> dict:
    from talaria_testing.fake_llm import agent_server

    srv = agent_server(
        root / "srv",
        llm.base_url,
        toolsets="todo",
        env={"TALARIA_SERVER_THREADS": str(3 * opts.turns + 16), "TALARIA_AGENT_WORKERS": str(opts.workers)},
    )
    populate(srv.session_dir, opts.sessions, opts.messages)
    counts: dict = {"tokens": 0}
    srv.start()
    try:
        sids = [srv.post_json("/api/session/new", {})["session"]["session_id"] for _ in range(opts.turns)]
        started = [start_turn(srv, sid, f"session {n} turn 0") for n, sid in enumerate(sids)]
        refused = [data.get("error") for status, data in started if status != 200]
        ends: list[str] = []
        readers = [
            threading.Thread(target=lambda s=data["stream_id"]: ends.append(read_turn(srv.port, s, counts)))
            for status, data in started
            if status == 200
        ]
        wall = time.monotonic()
        for t in readers:
            t.start()
        for t in readers:
            t.join()
        wall = time.monotonic() - wall
        problems = [
            p
            for n, (sid, (status, _)) in enumerate(zip(sids, started, strict=True))
            if status == 200
            and (p := saved_whole(srv.session_dir / f"{sid}.json", f"session {n} turn 0", opts.tokens))
        ]
    finally:
        srv.stop()
    return {
        "turns": opts.turns,
        "done": ends.count("done"),
        "saved_whole": len(readers) - len(problems),
        "refused": refused,
        "problems": problems[:5],
        "wall_s": round(wall, 1),
        "tokens": counts["tokens"],
    }


# ---------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=2000)
    parser.add_argument("--messages", type=int, default=4, help="messages per session")
    parser.add_argument("--long-messages", type=int, default=1000, help="messages of the session opened")
    parser.add_argument("--turns", type=int, default=32, help="turns streaming at once")
    parser.add_argument("--rate", type=float, default=100.0, help="tokens per second per turn")
    parser.add_argument("--tokens", type=int, default=600, help="tokens per turn (two answers)")
    parser.add_argument("--probe-tokens", type=int, default=300, help="tokens of the turn in the browser")
    parser.add_argument("--clients", type=int, default=10)
    parser.add_argument("--requests", type=int, default=1000, help="timed requests per path")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--workers", type=int, default=0, help="agent worker processes (TALARIA_AGENT_WORKERS; 0 = threads)"
    )
    parser.add_argument("--cpu-window", type=float, default=10.0, help="seconds the CPU is measured over")
    parser.add_argument(
        "--quick", action="store_true", help="short runs: 300 requests, a 200-token probe, 5 s of CPU"
    )
    parser.add_argument("--check-saved", action="store_true", help="check every turn is saved whole")
    parser.add_argument("--corpus", type=Path, help="a folder keeping the populated sessions between runs")
    parser.add_argument("--serve-llm", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--probe-log", type=Path, help=argparse.SUPPRESS)
    opts = parser.parse_args(argv)
    if opts.serve_llm:
        serve_llm(opts.serve_llm, opts.rate, opts.tokens, opts.probe_tokens, opts.probe_log)
        return 0
    from api.store import config

    config.configure_from_environment()  # now: a later first use would rebind the folders populate writes to
    if opts.quick:
        opts.requests, opts.probe_tokens, opts.cpu_window = 300, 200, 5.0
    runs = []
    for n in range(opts.runs):
        # The fake LLM's process ends with the run, also when setting the run up fails.
        with (
            tempfile.TemporaryDirectory(prefix="talaria-bench-many-") as tmp,
            LLMProcess(Path(tmp), opts.rate, opts.tokens, opts.probe_tokens) as llm,
        ):
            runs.append((check_run if opts.check_saved else load_run)(opts, Path(tmp), llm))
        print(f"run {n + 1}: {json.dumps(runs[-1])}", flush=True)
    if opts.check_saved:
        whole = all(r["saved_whole"] + len(r["refused"]) == r["turns"] for r in runs)
        print(f"{opts.turns} turns at once, {opts.runs} runs: every turn saved whole: {whole}")
        return 0 if whole else 1
    med = lambda key, field: statistics.median(  # noqa: E731
        [r[key][field] for r in runs if r[key][field] is not None] or [float("nan")]
    )
    print(
        f"{opts.sessions} sessions, {opts.turns} turns streaming at {opts.rate:g} tokens/s with tool calls, "
        f"{opts.clients} clients, {opts.requests} requests per path; median of {opts.runs} runs:"
    )
    for key, label in (
        ("sidebar", "GET /api/sessions?limit=100"),
        ("health", "GET /health"),
        ("open_page", f"GET /api/session (last 100 of {opts.long_messages})"),
        ("open_long", f"GET /api/session ({opts.long_messages} messages)"),
    ):
        print(
            f"  {label:44} p50 {med(key, 'client_p50_ms'):8.1f} ms  p99 {med(key, 'client_p99_ms'):8.1f} ms  errors {sum(r[key]['errors'] for r in runs)}"
        )
    print(
        f"  {'token-to-visible in Chromium':44} p50 {med('visible', 'p50_ms'):8.1f} ms  p99 {med('visible', 'p99_ms'):8.1f} ms"
    )
    print(
        f"  CPU per 1,000 tokens: server {med('cpu', 'server_ms_per_1k'):.0f} ms, "
        f"processes under it {med('cpu', 'children_ms_per_1k'):.0f} ms "
        f"({med('cpu', 'tokens_per_s'):.0f} tokens/s streamed, {med('cpu', 'tokens_per_event'):.1f} per event)"
    )
    return 0


if __name__ == "__main__":
    # The server this starts reads its settings from these: never the person's real ~/.hermes.
    os.environ["HERMES_HOME"] = tempfile.mkdtemp(prefix="talaria-bench-home-")
    os.environ["HERMES_WEBUI_STATE_DIR"] = tempfile.mkdtemp(prefix="talaria-bench-state-")
    sys.exit(main())

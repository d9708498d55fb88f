"""Content search at scale, through the real server: N sessions × 20 messages written as files, then

- the full rebuild of ``search.db`` at start (the server answering meanwhile: ``/health`` sampled),
- a two-word query p50/p99 over HTTP through the index, beside the linear scan of the files (the code the
  server answers with until the index is ready, ``session_catalogue.search_sessions``, run in process),
- the index update after a save (a rename: one session's rows replaced), as the server times it.

    .venv/bin/python bench/bench_search.py                       # 20,000 sessions
    .venv/bin/python bench/bench_search.py --sessions 2000 --queries 100
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path

import orjson

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from talaria_testing.server_proc import ServerProc  # noqa: E402

MESSAGES = 20
WORDS_PER_MESSAGE = 24
GOALS = {"query_p99_ms": 20.0, "update_ms": 2.0, "rebuild_s": 60.0}


def vocabulary(rng: random.Random, size: int = 20_000) -> list[str]:
    syllables = [
        "ka",
        "lo",
        "mi",
        "ne",
        "ru",
        "sa",
        "ti",
        "vo",
        "ze",
        "qu",
        "bra",
        "sto",
        "gli",
        "pha",
        "wen",
    ]
    words: set[str] = set()
    while len(words) < size:
        words.add("".join(rng.choice(syllables) for _ in range(rng.randint(2, 4))))
    return sorted(words)


def write_corpus(session_dir: Path, sessions: int, rng: random.Random, vocab: list[str]) -> None:
    """Session files as the store writes them (one JSON object each); words drawn Zipf-like."""
    session_dir.mkdir(parents=True, exist_ok=True)
    weights = [1.0 / (rank + 1) for rank in range(len(vocab))]
    base = time.time() - sessions * 60
    pool = rng.choices(vocab, weights, k=200_000)
    for n in range(sessions):
        sid = f"b{n:06d}"
        start = base + n * 60
        messages = []
        for i in range(MESSAGES):
            at = rng.randrange(0, len(pool) - WORDS_PER_MESSAGE)
            text = " ".join(pool[at : at + WORDS_PER_MESSAGE]).capitalize() + "."
            role = "user" if i % 2 == 0 else "assistant"
            messages.append({"role": role, "content": text, "timestamp": start + i})
        data = {
            "session_id": sid,
            "title": f"Session {n}",
            "workspace": None,
            "model": "bench-model",
            "created_at": start,
            "updated_at": start + MESSAGES,
            "messages": messages,
            "context_messages": messages,
        }
        (session_dir / f"{sid}.json").write_bytes(orjson.dumps(data))


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


def timed_get(srv: ServerProc, path: str) -> float:
    started = time.perf_counter()
    status, _, _ = srv.request("GET", path)
    elapsed = (time.perf_counter() - started) * 1000
    if status != 200:
        raise RuntimeError(f"GET {path} → {status}")
    return elapsed


def two_word_queries(rng: random.Random, vocab: list[str], count: int) -> list[str]:
    # Words of every frequency: common (thousands of matches), middling and rare (a few or none).
    return [f"{rng.choice(vocab[: len(vocab) // 2])} {rng.choice(vocab)}" for _ in range(count)]


def scan_times(state_dir: Path, queries: list[str]) -> list[float]:
    """The linear scan over the same files, in this process (the server's fallback code)."""
    from api import config, models
    from api.services import session_catalogue

    config.configure({**config.load_settings(), "state_dir": str(state_dir)})
    models.SESSION_DIR, models.SESSION_INDEX_FILE = config.SESSION_DIR, config.SESSION_INDEX_FILE
    session_catalogue.search_sessions("warm-up", content=True)  # the sidebar index is read once
    samples = []
    for q in queries:
        started = time.perf_counter()
        session_catalogue.search_sessions(q, content=True)
        samples.append((time.perf_counter() - started) * 1000)
    return samples


def run(sessions: int, queries: int, saves: int, seed: int, scan_queries: int) -> dict:
    root = Path(tempfile.mkdtemp(prefix="talaria-bench-search-"))
    try:
        return measure(root, sessions, queries, saves, seed, scan_queries)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def measure(root: Path, sessions: int, queries: int, saves: int, seed: int, scan_queries: int) -> dict:
    rng = random.Random(seed)
    vocab = vocabulary(rng)
    srv = ServerProc(root, startup_timeout=600)
    started = time.perf_counter()
    write_corpus(srv.session_dir, sessions, rng, vocab)
    written_s = time.perf_counter() - started
    out: dict = {
        "sessions": sessions,
        "messages": sessions * MESSAGES,
        "corpus_written_s": round(written_s, 1),
    }
    try:
        started = time.perf_counter()
        srv.start()
        out["server_start_s"] = round(time.perf_counter() - started, 2)
        health: list[float] = []
        search_during: list[float] = []
        progress: list[float] = []
        while True:
            status = srv.get_json("/api/search/status")
            if status["state"] != "rebuilding":
                break
            progress.append(status["progress"])
            health.append(timed_get(srv, "/health"))
            if len(health) % 25 == 0:
                search_during.append(timed_get(srv, "/api/sessions/search?q=kalo&content=1"))
            time.sleep(0.02)
        out["rebuild"] = {
            "state": status["state"],
            "rebuild_s": status.get("rebuild_s"),
            "rebuild_cpu_s": status.get("rebuild_cpu_s"),
            "progress_seen": [round(p, 2) for p in progress[:: max(1, len(progress) // 6)]],
            "health_during_ms": {
                "samples": len(health),
                "p50": round(statistics.median(health), 2) if health else None,
                "p99": round(percentile(health, 0.99), 2) if health else None,
                "max": round(max(health), 2) if health else None,
            },
            "scan_search_during_ms": [round(t, 1) for t in search_during[:5]],
        }
        asked = two_word_queries(rng, vocab, queries)
        for q in asked[:5]:  # the reader connections and page cache warm up
            timed_get(srv, "/api/sessions/search?" + urllib.parse.urlencode({"q": q, "content": "1"}))
        index_ms = [
            timed_get(srv, "/api/sessions/search?" + urllib.parse.urlencode({"q": q, "content": "1"}))
            for q in asked
        ]
        out["query_index_http_ms"] = {
            "p50": round(statistics.median(index_ms), 2),
            "p99": round(percentile(index_ms, 0.99), 2),
            "max": round(max(index_ms), 2),
        }
        for n in rng.sample(range(sessions), saves):
            srv.post_json("/api/session/rename", {"session_id": f"b{n:06d}", "title": f"Renamed {n}"})
            time.sleep(0.005)  # one save at a time: each update timed alone
        status = srv.get_json("/api/search/status")
        out["update_after_save_ms"] = status.get("update_ms")
        out["update_after_save_cpu_ms"] = status.get("update_cpu_ms")
    finally:
        srv.stop()
    print(json.dumps(out), file=sys.stderr, flush=True)  # the server's figures, before the long scan
    scan_ms = scan_times(srv.state_dir, asked[:scan_queries])
    out["query_linear_scan_ms"] = {
        "queries": len(scan_ms),
        "p50": round(statistics.median(scan_ms), 2),
        "p99": round(percentile(scan_ms, 0.99), 2),
        "max": round(max(scan_ms), 2),
    }
    out["goals"] = {
        "query_p99_ms<=20": out["query_index_http_ms"]["p99"] <= GOALS["query_p99_ms"],
        "update_p50_ms<=2": (out["update_after_save_ms"] or {}).get("p50", 1e9) <= GOALS["update_ms"],
        "update_p99_ms<=2": (out["update_after_save_ms"] or {}).get("p99", 1e9) <= GOALS["update_ms"],
        "rebuild_s<=60": (out["rebuild"]["rebuild_s"] or 1e9) <= GOALS["rebuild_s"],
    }
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sessions", type=int, default=20_000)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--saves", type=int, default=200)
    parser.add_argument("--seed", type=int, default=26)
    parser.add_argument("--scan-queries", type=int, default=30, help="queries timed through the linear scan")
    args = parser.parse_args(argv)
    print(json.dumps(run(args.sessions, args.queries, args.saves, args.seed, args.scan_queries), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

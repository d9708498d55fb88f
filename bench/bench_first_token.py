"""Benchmark: how long the first turn after a start waits for its first token, with and without warm-up.

Each run starts the real server (a subprocess) on a state folder holding one earlier session, waits
for ``/health``, waits ``--delay`` seconds more (a person opening the page and typing), then sends a
turn in that session and reads its SSE stream. The fake LLM in this process notes when it receives
the request and when it writes the first token. Measured per run:

- first token: from ``POST /api/chat/start`` to the SSE client reading the first token;
- before the LLM: from ``POST /api/chat/start`` to the LLM receiving the request (building the agent);
- after the LLM: from the LLM writing the first token to the client reading it (the relay);
- a second turn's first token in the same run: the floor of the same work with a warm agent;
- ``/health`` and ``/`` (the page) fetched one after the other during the delay, while the warm-up runs.

Modes: ``off`` (``TALARIA_WARM_UP=0``, the behaviour before the warm-up) and ``on``. Medians over runs.

    .venv/bin/python bench/bench_first_token.py [--runs 5] [--delay 3] [--toolsets ""]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bench_chat import reply, start_turn, timed_fake  # noqa: E402
from talaria_testing.fake_llm import FakeLLM, Reply, agent_server  # noqa: E402


def seeded_root(tmp: Path, fake: FakeLLM, toolsets: str) -> Path:
    """A state folder with one session that has had a turn (the session the warm-up builds for)."""
    root = tmp / "seed"
    with agent_server(root, fake.base_url, toolsets=toolsets) as srv:
        sid = srv.post_json("/api/session/new", {})["session"]["session_id"]
        fake.script(Reply(text="seeded"))
        start_turn(srv, sid, "seed").join(120)
    return root


def one_run(root: Path, fake: FakeLLM, sent: dict, warm: bool, opts) -> dict:
    srv = agent_server(root, None, toolsets=opts.toolsets, env={"TALARIA_WARM_UP": "1" if warm else "0"})
    srv.start()
    try:
        # The page while the warm-up runs: /health and / right after the start, one after the other.
        page = []
        until = time.monotonic() + opts.delay
        while not page or time.monotonic() < until:
            for path in ("/health", "/"):
                started = time.perf_counter()
                assert srv.request("GET", path)[0] == 200
                page.append(time.perf_counter() - started)
            time.sleep(0.05)
        sid = srv.get_json("/api/sessions")["sessions"][0]["session_id"]
        out = {"page_p50": statistics.median(page), "page_max": max(page)}
        for name in ("first", "second"):
            sent.clear()
            before = len(fake.requests(kind="chat"))
            fake.script(reply(20, 0.0))
            posted, posted_wall = time.perf_counter(), time.time()
            reader = start_turn(srv, sid, f"{name} turn")
            reader.join(120)
            assert reader.received, reader.names
            arrived = fake.requests(kind="chat")[before]["time"]
            first_sent = min(sent.values())
            first_read = min(reader.received.values())
            out[name] = first_read - posted
            if name == "first":
                out["before_llm"] = arrived - posted_wall
                out["relay"] = first_read - first_sent
        return out
    finally:
        srv.stop()
        warm_line = [line for line in srv.output if "warm-up done in" in line]
        if warm_line:
            print("  " + warm_line[0].split("talaria.agent_pool: ")[-1].strip(), file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--delay", type=float, default=3.0, help="seconds between /health and the first turn")
    parser.add_argument("--toolsets", default="", help="TALARIA_AGENT_TOOLSETS ('' = the agent's defaults)")
    opts = parser.parse_args(argv)

    sent: dict[str, float] = {}
    fake = timed_fake(sent).start()
    results: dict[str, list[dict]] = {"off": [], "on": []}
    try:
        with tempfile.TemporaryDirectory(prefix="talaria-bench-first-") as tmp:
            root = seeded_root(Path(tmp), fake, opts.toolsets)
            for _ in range(opts.runs):
                for mode in ("off", "on"):
                    results[mode].append(one_run(root, fake, sent, mode == "on", opts))
    finally:
        fake.stop()

    def med(mode: str, key: str) -> float:
        return statistics.median(run[key] for run in results[mode]) * 1000

    print(f"{opts.runs} runs per mode; first turn {opts.delay:g} s after /health; toolsets "
          f"{opts.toolsets or 'the agent defaults'}; medians in ms")  # fmt: skip
    print(f"{'warm-up':<8} {'first token':>12} {'before LLM':>11} {'relay':>7} {'2nd turn (floor)':>17} "
          f"{'page p50':>9} {'page max':>9}")  # fmt: skip
    for mode in ("off", "on"):
        print(
            f"{mode:<8} {med(mode, 'first'):>12.0f} {med(mode, 'before_llm'):>11.0f} "
            f"{med(mode, 'relay'):>7.1f} {med(mode, 'second'):>17.0f} "
            f"{med(mode, 'page_p50'):>9.1f} {med(mode, 'page_max'):>9.1f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Benchmark: is the server's memory flat over 1,000 turns, and are the agent workers' bounded by recycling?

The real server with its agent in two worker processes (recycled after ``--worker-max-turns`` turns), the fake
LLM answering at once (every fourth turn calls the agent's todo tool first), ``--lanes`` clients sending turns
through ``/api/chat/start`` and reading each to its end through ``/api/chat/stream``, each moving to a fresh
session every ``--turns-per-session`` turns (``talaria_testing.many_turns``). After ``--warm-up`` turns the
server's RSS is read and its Python heap traced from then on (``talaria_testing.heap_probe``); the heap is
measured once the bounded caches turned over (``--turn-over`` turns later) and at the end. Figures are medians
over ``--runs`` runs:

- turns/s;
- the server's RSS after the warm-up and at the end, and its growth;
- the heap's growth between its two measures, per turn (what the server keeps per turn);
- the largest RSS an agent worker reached, and how many workers the run used.

    .venv/bin/python bench/bench_server_memory.py                 # 1,000 turns, 3 runs
    .venv/bin/python bench/bench_server_memory.py --turns 400 --runs 1
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from talaria_testing.fake_llm import FakeLLM  # noqa: E402
from talaria_testing.many_turns import Lanes, WorkerWatch, answer, memory_server, rss_kb  # noqa: E402


def one_run(args: argparse.Namespace) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="bench-memory-") as tmp, FakeLLM(default_reply=answer) as llm:
        srv = memory_server(Path(tmp), llm.base_url, lanes=args.lanes, worker_max_turns=args.worker_max_turns)
        with srv, WorkerWatch(srv) as workers:
            assert srv.proc is not None
            turns = Lanes(srv, args.lanes, args.turns_per_session)
            started = time.monotonic()
            turns.run(args.warm_up)
            rss_warm = rss_kb(srv.proc.pid)
            srv.mark()
            turns.run(args.turn_over)
            first = srv.measure()
            measured_from = turns.sent
            turns.run(args.turns - turns.sent)
            last = srv.measure()
            elapsed = time.monotonic() - started
            rss_end = rss_kb(srv.proc.pid)
        return {
            "turns": turns.sent,
            "turns_per_s": turns.sent / elapsed,
            "rss_after_warm_up_mb": rss_warm / 1024,
            "rss_end_mb": rss_end / 1024,
            "rss_growth_mb": (rss_end - rss_warm) / 1024,
            "heap_growth_per_turn_b": (last["traced"] - first["traced"]) / (turns.sent - measured_from),
            "worker_peak_rss_mb": max(workers.peak_kb.values()) / 1024,
            "workers": len(workers.peak_kb),
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--lanes", type=int, default=6)
    parser.add_argument("--turns-per-session", type=int, default=25)
    parser.add_argument("--warm-up", type=int, default=200)
    parser.add_argument("--turn-over", type=int, default=200)
    parser.add_argument("--worker-max-turns", type=int, default=200)
    args = parser.parse_args()
    runs = []
    for number in range(args.runs):
        figures = one_run(args)
        runs.append(figures)
        print(f"run {number + 1}: " + ", ".join(f"{k} {v:.1f}" for k, v in figures.items()), flush=True)
    print(f"median of {len(runs)} run(s):")
    for key in runs[0]:
        print(f"  {key:24} {statistics.median(run[key] for run in runs):10.1f}")


if __name__ == "__main__":
    main()

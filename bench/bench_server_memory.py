"""Benchmark: is the server's memory flat over 1,000 turns, and are the agent workers' bounded by recycling?

The real server with its agent in two worker processes (recycled after ``--worker-max-turns`` turns), the fake
LLM answering at once (every fourth turn calls the agent's todo tool first), ``--lanes`` clients sending turns
through ``/api/chat/start`` and reading each to its end through ``/api/chat/stream``, each moving to a fresh
session every ``--turns-per-session`` turns (``talaria_testing.many_turns``). Each run is two runs of
``--turns`` turns: one reads the server's RSS after ``--warm-up`` turns, after ``--turn-over`` more and at the
end; the other traces the server's Python heap from the warm-up on (``talaria_testing.heap_probe``; tracing
costs memory of its own, so that run's RSS is not reported) and measures it after the turn-over and at the end.
Figures are medians over ``--runs`` runs:

- turns/s;
- the server's RSS after the warm-up and at the end, its growth, and its growth per turn after the turn-over;
- the heap's growth per turn after the turn-over (what the server keeps per turn);
- the largest RSS an agent worker reached, and how many workers a run used.

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


def one_run(args: argparse.Namespace, traced: bool) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="bench-memory-") as tmp, FakeLLM(default_reply=answer) as llm:
        srv = memory_server(Path(tmp), llm.base_url, lanes=args.lanes, worker_max_turns=args.worker_max_turns)
        with srv, WorkerWatch(srv) as workers:
            assert srv.proc is not None
            turns = Lanes(srv, args.lanes, args.turns_per_session)
            started = time.monotonic()
            turns.run(args.warm_up)
            rss_warm = rss_kb(srv.proc.pid)
            if traced:
                srv.mark()
            turns.run(args.turn_over)
            rss_over, first = rss_kb(srv.proc.pid), srv.measure() if traced else {}
            measured_from = turns.sent
            turns.run(args.turns - turns.sent)
            rss_end, last = rss_kb(srv.proc.pid), srv.measure() if traced else {}
            elapsed = time.monotonic() - started
        measured = turns.sent - measured_from
        if traced:
            return {
                "turns_per_s": turns.sent / elapsed,
                "heap_growth_per_turn_b": (last["traced"] - first["traced"]) / measured,
                "worker_peak_rss_mb": max(workers.peak_kb.values()) / 1024,
                "workers": len(workers.peak_kb),
            }
        return {
            "rss_after_warm_up_mb": rss_warm / 1024,
            "rss_end_mb": rss_end / 1024,
            "rss_growth_mb": (rss_end - rss_warm) / 1024,
            "rss_growth_per_turn_after_turn_over_b": (rss_end - rss_over) * 1024 / measured,
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
        figures = {**one_run(args, traced=False), **one_run(args, traced=True)}
        runs.append(figures)
        print(f"run {number + 1}: " + ", ".join(f"{k} {v:.1f}" for k, v in figures.items()), flush=True)
    print(f"median of {len(runs)} run(s):")
    for key in runs[0]:
        print(f"  {key:40} {statistics.median(run[key] for run in runs):10.1f}")


if __name__ == "__main__":
    main()

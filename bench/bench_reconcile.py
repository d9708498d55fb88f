"""Benchmark: the append-only merge and the reconciled model context against a plain hash merge.

The sidecar holds N messages, state.db the same N rows (as a state.db reader yields them) plus 10 newer
ones; the result must hold N + 10 rows. The floor is a hash-set merge keyed on (role, content, timestamp,
tool_call_id).

The "first call" column clears the text memos first (what the first turn after a start costs); the
median is over later calls on the same texts (every chat turn re-merges the same transcript).

Run: .venv/bin/python bench/bench_reconcile.py [--sizes 100,1000,5000] [--repeat 7]
"""

from __future__ import annotations

import argparse
import copy
import gc
import json
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from api.rules.message_keys import clear_memos  # noqa: E402
from api.store.models import merge_session_messages_append_only, reconciled_state_db_messages_for_session  # noqa: E402
from talaria_testing.transcripts import session_view  # noqa: E402

T0 = 1_750_000_000.0


def _local_stream(n: int, seed: int, t0: float) -> list[dict]:
    """A conversation: user/assistant turns, a tool call and its ~4 KB result every 10th turn."""
    rnd = random.Random(seed)
    words = [f"w{i}" for i in range(3000)]
    msgs: list[dict] = []
    turn = 0
    while len(msgs) < n:
        msgs.append(
            {
                "role": "user",
                "content": " ".join(rnd.choices(words, k=35)) + "?",
                "timestamp": t0 + len(msgs) * 4.0,
            }
        )
        turn += 1
        if turn % 10 == 0:
            cid = f"call_{seed}_{turn}"
            call = {"id": cid, "type": "function", "function": {"name": "terminal", "arguments": "{}"}}
            msgs.append(
                {"role": "assistant", "content": "", "tool_calls": [call], "timestamp": t0 + len(msgs) * 4.0}
            )
            out = json.dumps({"output": "\n".join(rnd.choices(words, k=600)), "exit_code": 0})
            msgs.append(
                {
                    "role": "tool",
                    "content": out,
                    "tool_call_id": cid,
                    "name": "terminal",
                    "timestamp": t0 + len(msgs) * 4.0,
                }
            )
        text = "\n\n".join(" ".join(rnd.choices(words, k=60)) for _ in range(4))
        msgs.append({"role": "assistant", "content": "## " + text, "timestamp": t0 + len(msgs) * 4.0})
    return msgs[:n]


def _local_state_rows(msgs: list[dict]) -> list[dict]:
    out = []
    for m in msgs:
        d = {"role": m["role"], "content": m["content"], "timestamp": m["timestamp"]}
        if m.get("tool_calls"):
            d["tool_calls"] = copy.deepcopy(m["tool_calls"])
        if m["role"] == "tool":
            d["tool_call_id"] = m["tool_call_id"]
            d["tool_name"] = d["name"] = m.get("name") or "terminal"
        out.append(d)
    return out


def _copy(msgs: list[dict]) -> list[dict]:
    return [dict(m) for m in msgs]


def hash_merge(side: list[dict], state: list[dict]) -> list[dict]:
    def key(m):
        return (m.get("role"), m.get("content"), m.get("timestamp"), m.get("tool_call_id"))

    seen = {key(m) for m in side}
    out = list(side)
    for m in state:
        k = key(m)
        if k not in seen:
            seen.add(k)
            out.append(m)
    return out


def measure(op, setup, repeat: int, expect: int, cold: bool = False) -> tuple[float, float]:
    """(median of ``repeat`` timed runs, the untimed-by-median first run) in ms.

    With ``cold`` the text memos are cleared first, so the first run is a first call on these texts.
    """
    if cold:
        clear_memos()
    samples = []
    first = 0.0
    for i in range(repeat + 1):  # the first run is a warm-up
        ctx = setup()
        gc.collect()
        t0 = time.perf_counter()
        result = op(ctx)
        elapsed = (time.perf_counter() - t0) * 1000.0
        if len(result) != expect:
            raise SystemExit(f"wrong result length {len(result)}, expected {expect}")
        if i:
            samples.append(elapsed)
        else:
            first = elapsed
    return statistics.median(samples), first


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="100,1000,5000")
    ap.add_argument("--repeat", type=int, default=7, help="timed runs per row (median reported; min 5)")
    args = ap.parse_args(argv)
    sizes = [int(x) for x in args.sizes.split(",") if x.strip()]
    repeat = max(5, args.repeat)
    make_stream, state_rows = _local_stream, _local_state_rows
    stream = make_stream(max(sizes) + 12, 1234, T0)
    print(f"Reconciliation; median of {repeat} runs, and the first call (ms)")
    print(
        f"| {'variant':<18} | {'N':>5} | {'talaria':>9} | {'first call':>10} | {'hash floor':>10} | {'x floor':>7} |"
    )
    print(f"|{'-' * 20}|{'-' * 6}:|{'-' * 10}:|{'-' * 11}:|{'-' * 11}:|{'-' * 8}:|")
    for n in sizes:

        def setup_merge(n=n):
            return _copy(stream[:n]), state_rows(stream[: n + 10])

        def setup_ctx(n=n):
            session = session_view(
                session_id=f"bench{n}", messages=_copy(stream[:n]), context_messages=_copy(stream[:n])
            )
            return session, state_rows(stream[: n + 10])

        floor, _ = measure(lambda c: hash_merge(*c), setup_merge, repeat, n + 10)
        rows = [
            ("merge_append_only", lambda c: merge_session_messages_append_only(c[0], c[1]), setup_merge),
            (
                "reconciled_ctx",
                lambda c: reconciled_state_db_messages_for_session(
                    c[0], prefer_context=True, state_messages=c[1]
                ),
                setup_ctx,
            ),
        ]
        for name, op, setup in rows:
            ms, first = measure(op, setup, repeat, n + 10, cold=True)
            print(
                f"| {name:<18} | {n:>5} | {ms:>9.3f} | {first:>10.3f} | {floor:>10.3f} | {ms / floor:>7.1f} |"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())

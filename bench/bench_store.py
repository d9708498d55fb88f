"""The session store beside its floor: save (fresh, and +2 messages per turn, with 0 and with 2,000 other
sessions), cold load, and the sidebar listing of 2,000 sessions.

Floors are the same work with nothing of ours in it: the same messages through ``orjson.dumps`` + write +
fsync + ``os.replace`` (+ folder fsync, which Talaria also does), a plain ``orjson.loads`` of the same file,
and a plain parse of an index file of the same rows.

    .venv/bin/python bench/bench_store.py [--sizes 100,1000,5000] [--sessions 2000] [--runs 7]
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import api.store.models as M  # noqa: E402
from api.store.models import store  # noqa: E402

WORDS = (
    "the a to of and in is it for on with as that café → 日本語 alpha beta gamma delta epsilon zeta".split()
)  # noqa: SIM905


def make_messages(n: int, seed: int = 7, t0: float = 1.75e9) -> list[dict]:
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        role = "user" if i % 2 == 0 else "assistant"
        size = rnd.randint(25, 40) if role == "user" else rnd.randint(150, 250)
        msg = {
            "role": role,
            "content": " ".join(rnd.choices(WORDS, k=size)),
            "timestamp": t0 + 4.0 * i + rnd.random(),
        }
        if role == "assistant" and i % 20 == 19:
            msg["tool_calls"] = [
                {"id": f"c{i}", "type": "function", "function": {"name": "terminal", "arguments": "{}"}}
            ]
        out.append(msg)
    return out


def timed(fn, runs: int, setup=None) -> float:
    samples = []
    for i in range(runs + 1):
        ctx = setup() if setup else None
        gc.collect()
        t0 = time.perf_counter()
        fn(ctx)
        dt = (time.perf_counter() - t0) * 1000
        if i:
            samples.append(dt)
    return statistics.median(samples)


def durable_floor(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    fd = os.open(path.parent, os.O_RDONLY)
    os.fsync(fd)
    os.close(fd)


def use(folder: Path) -> None:
    M.SESSION_DIR = folder
    M.SESSION_INDEX_FILE = folder / "_index.json"
    M.SESSIONS.clear()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="100,1000,5000")
    ap.add_argument("--sessions", type=int, default=2000)
    ap.add_argument("--runs", type=int, default=7)
    args = ap.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]
    root = Path(tempfile.mkdtemp(prefix="talaria-bench-store-"))
    rows: list[tuple[str, int, float, float]] = []
    try:
        for n in sizes:
            msgs = make_messages(n + 2 * (args.runs + 2))
            folder = root / f"n{n}"
            folder.mkdir()
            use(folder)
            payload = M.Session(session_id="floor", messages=msgs[:n]).to_payload()
            floor_bytes = orjson.dumps(payload)
            floor_path = folder / "floor.json"

            fresh_ids = iter(range(10**6))

            def save_new(_c, n=n, msgs=msgs, ids=fresh_ids):
                M.Session(session_id=f"fresh{next(ids)}", messages=msgs[:n]).save()

            rows.append(
                (
                    "save_new",
                    n,
                    timed(save_new, args.runs),
                    timed(lambda _c: durable_floor(floor_path, floor_bytes), args.runs),
                )
            )

            session = M.Session(session_id="turns", messages=list(msgs[:n]))
            session.save()
            cursor = [n]

            def add_two(_c=None, session=session, msgs=msgs, cursor=cursor):
                session.messages.extend(msgs[cursor[0] : cursor[0] + 2])
                cursor[0] += 2

            def resave(_c, session=session):
                session.save()

            rows.append(
                (
                    "resave+2",
                    n,
                    timed(resave, args.runs, add_two),
                    timed(lambda _c: durable_floor(floor_path, floor_bytes), args.runs),
                )
            )
            durable_floor(floor_path, floor_bytes)
            rows.append(
                (
                    "load_cold",
                    n,
                    timed(lambda _c: M.Session.load("fresh0"), args.runs),
                    timed(lambda _c: orjson.loads(floor_path.read_bytes()), args.runs),
                )
            )

        # 2,000 other sessions: the per-turn save must not grow with them; the sidebar lists them all.
        corpus = root / "corpus"
        corpus.mkdir()
        use(corpus)
        for k in range(args.sessions):
            M.Session(
                session_id=f"s{k:05d}", title=f"Session {k}", messages=make_messages(16 + k % 9, seed=k)
            ).save(skip_index=True)
        store().index.rebuild_index_file(corpus)
        for n in sizes:
            msgs = make_messages(n + 2 * (args.runs + 2))
            session = M.Session(session_id=f"turns{n}", messages=list(msgs[:n]))
            session.save()
            cursor = [n]

            def add_two(_c=None, session=session, msgs=msgs, cursor=cursor):
                session.messages.extend(msgs[cursor[0] : cursor[0] + 2])
                cursor[0] += 2

            floor_bytes = orjson.dumps(M.Session(session_id="floor", messages=msgs[:n]).to_payload())
            floor_path = corpus / "_floor.json"
            rows.append(
                (
                    f"resave+2 @{args.sessions}",
                    n,
                    timed(lambda _c, s=session: s.save(), args.runs, add_two),
                    timed(lambda _c: durable_floor(floor_path, floor_bytes), args.runs),
                )
            )
        store().index.flush()
        index_bytes = (corpus / "_index.json").read_bytes()

        def listing(_c):
            M.SESSIONS.clear()
            return M.all_sessions()

        rows.append(
            (
                "all_sessions",
                args.sessions,
                timed(listing, args.runs),
                timed(lambda _c: orjson.loads(index_bytes), args.runs),
            )
        )
    finally:
        store().index.flush()
        shutil.rmtree(root, ignore_errors=True)

    print(f"{'workload':<18} {'size':>6} {'talaria ms':>11} {'floor ms':>9} {'x floor':>8}")
    for name, size, ours, floor in rows:
        print(
            f"{name:<18} {size:>6} {ours:>11.3f} {floor:>9.3f} {ours / floor if floor else float('nan'):>8.2f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Startup recovery over 2,000 sessions with 1% genuine losses, beside its floor.

The floor is the least any recovery can do on the same folder: one scandir, then for each ``.bak`` read
and parse the live file and the backup, compare message counts, and durably write the backup's bytes
over the live file (temp file, fsync, replace) when it is larger. Talaria additionally keeps each
replaced file (a durable copy) and syncs the folder.

    .venv/bin/python bench/bench_recovery.py [--sessions 2000] [--messages 20] [--runs 7]
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

from api.services.session_recovery import recover_all_sessions_on_startup  # noqa: E402

LOSS_DROP = 4


def _messages(k: int, n: int) -> list[dict]:
    rnd = random.Random(k)
    words = "alpha beta gamma delta café → 日本語 epsilon zeta eta theta iota kappa".split()  # noqa: SIM905
    out = []
    for i in range(n):
        role = "user" if i % 2 == 0 else "assistant"
        size = 30 if role == "user" else rnd.randint(120, 250)
        out.append(
            {
                "role": role,
                "content": " ".join(rnd.choices(words, k=size)),
                "timestamp": 1.7e9 + k * 3600 + i * 4.0,
            }
        )
    return out


def build_corpus(folder: Path, sessions: int, n_messages: int) -> dict[str, tuple[bytes, bytes]]:
    """Write ``sessions`` session files; return {sid: (shrunk live bytes, full backup bytes)} for the 1% lost."""
    lost_every = 100
    armed = {}
    for k in range(sessions):
        sid = f"bench{k:05d}"
        doc = {"session_id": sid, "title": f"Bench {k}", "messages": _messages(k, n_messages + k % 9 - 4)}
        doc["context_messages"] = doc["messages"]
        full = orjson.dumps(doc, option=orjson.OPT_INDENT_2)
        (folder / f"{sid}.json").write_bytes(full)
        if k % lost_every == lost_every // 2:
            shrunk = dict(doc, messages=doc["messages"][:-LOSS_DROP])
            armed[sid] = (orjson.dumps(shrunk, option=orjson.OPT_INDENT_2), full)
    return armed


def arm(folder: Path, armed: dict[str, tuple[bytes, bytes]]) -> None:
    for sid, (live, bak) in armed.items():
        (folder / f"{sid}.json").write_bytes(live)
        (folder / f"{sid}.json.bak").write_bytes(bak)


def floor(folder: Path) -> list[str]:
    restored = []
    with os.scandir(folder) as entries:
        baks = [e.name for e in entries if e.name.endswith(".json.bak")]
    for name in baks:
        live_path, bak_path = folder / name[:-4], folder / name
        bak_bytes = bak_path.read_bytes()
        try:
            live_n = len(orjson.loads(live_path.read_bytes())["messages"])
        except (OSError, ValueError, KeyError):
            live_n = -1
        if len(orjson.loads(bak_bytes)["messages"]) > live_n:
            tmp = live_path.with_name(live_path.name + ".tmp")
            with open(tmp, "wb") as fh:
                fh.write(bak_bytes)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, live_path)
            restored.append(name[:-9])
    return restored


def talaria(folder: Path) -> list[str]:
    result = recover_all_sessions_on_startup(folder)
    return [d["session_id"] for d in result["details"]]


def measure(variants: dict, folders: dict, armed: dict, runs: int) -> dict[str, list[float]]:
    """Alternate the variants run by run, so a change in machine load hits both alike."""
    samples: dict[str, list[float]] = {name: [] for name in variants}
    for i in range(runs + 1):
        for name, fn in variants.items():
            arm(folders[name], armed)
            gc.collect()
            t0 = time.perf_counter()
            restored = fn(folders[name])
            dt = (time.perf_counter() - t0) * 1000.0
            if sorted(restored) != sorted(armed):
                raise SystemExit(f"{name} restored {len(restored)} sessions, expected {len(armed)}")
            if i:  # the first run warms the page cache
                samples[name].append(dt)
    return samples


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sessions", type=int, default=2000)
    parser.add_argument("--messages", type=int, default=20)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--tmpdir", default=None)
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="bench_recovery_", dir=args.tmpdir))
    try:
        variants = {"floor": floor, "talaria": talaria}
        folders = {name: root / name for name in variants}
        for folder in folders.values():
            folder.mkdir()
            armed = build_corpus(folder, args.sessions, args.messages)
        results = measure(variants, folders, armed, args.runs)
        base = statistics.median(results["floor"])
        print(
            f"startup recovery: {args.sessions} sessions x ~{args.messages} messages, {len(armed)} genuine losses, {args.runs} runs"
        )
        print(f"| {'variant':<8} | {'median ms':>9} | {'min ms':>8} | {'x floor':>7} |")
        print(f"|{'-' * 10}|{'-' * 10}:|{'-' * 9}:|{'-' * 8}:|")
        for name, samples in results.items():
            med = statistics.median(samples)
            print(f"| {name:<8} | {med:9.2f} | {min(samples):8.2f} | {med / base:7.2f} |")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

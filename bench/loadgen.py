"""The HTTP load generator, run in its own process so its work never competes with the server's
or the benchmark's threads: ``clients`` concurrent clients (asyncio, one fresh connection per request)
each send GETs of ``path`` until ``requests`` are done. It prints one JSON object: client-observed
latencies and, from each response's ``Server-Timing`` header, the server's own queue and handling time.

    .venv/bin/python bench/loadgen.py --port 8787 --path '/api/sessions?limit=100' --clients 50 --requests 2000
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import time

_TIMING = re.compile(rb"(\w+);dur=([0-9.]+)")


async def fetch(host: str, port: int, path: str, timeout: float) -> dict:
    started = time.perf_counter()
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
        writer.write(f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nConnection: close\r\n\r\n".encode())
        raw = await asyncio.wait_for(reader.read(), timeout)
        writer.close()
    except (TimeoutError, OSError) as exc:
        return {"ms": (time.perf_counter() - started) * 1000, "status": type(exc).__name__}
    elapsed = (time.perf_counter() - started) * 1000
    head, _, body = raw.partition(b"\r\n\r\n")
    status_line = head.split(b"\r\n", 1)[0].split()
    timing = {}
    for line in head.split(b"\r\n")[1:]:
        if line.lower().startswith(b"server-timing:"):
            timing = {k.decode(): float(v) for k, v in _TIMING.findall(line)}
    return {
        "ms": elapsed,
        "status": int(status_line[1]) if len(status_line) > 1 else "no status line",
        "bytes": len(body),
        "timing": timing,
    }


async def run(
    host: str, port: int, path: str, clients: int, requests: int, warmup: int, timeout: float
) -> dict:
    for _ in range(warmup):
        await fetch(host, port, path, timeout)
    results: list[dict] = []
    remaining = requests

    async def client() -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            results.append(await fetch(host, port, path, timeout))

    wall = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(clients)))
    wall = time.perf_counter() - wall
    return {"results": results, "wall_s": wall}


def percentile(values: list[float], p: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))], 2)


def summarize(results: list[dict], wall_s: float) -> dict:
    ok = [r for r in results if r["status"] == 200]
    statuses: dict[str, int] = {}
    for r in results:
        statuses[str(r["status"])] = statuses.get(str(r["status"]), 0) + 1
    client = [r["ms"] for r in ok]
    app = [r["timing"]["app"] for r in ok if "app" in r.get("timing", {})]
    queue = [r["timing"]["queue"] for r in ok if "queue" in r.get("timing", {})]
    return {
        "requests": len(results),
        "statuses": statuses,
        "errors": len(results) - len(ok),
        "bytes": max((r["bytes"] for r in ok), default=0),
        "req_per_s": round(len(results) / wall_s, 1) if wall_s else None,
        "client_p50_ms": percentile(client, 50),
        "client_p99_ms": percentile(client, 99),
        "client_max_ms": round(max(client), 2) if client else None,
        # A request that failed or timed out waited at least this long: its time counts here too.
        "client_p99_all_ms": percentile([r["ms"] for r in results], 99),
        "server_app_p50_ms": percentile(app, 50),
        "server_app_p99_ms": percentile(app, 99),
        "server_queue_p50_ms": percentile(queue, 50),
        "server_queue_p99_ms": percentile(queue, 99),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--path", default="/api/sessions?limit=100")
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument(
        "--timeout", type=float, default=30.0, help="seconds before a request counts as failed"
    )
    args = parser.parse_args(argv)
    if args.host not in ("127.0.0.1", "::1", "localhost"):
        parser.error("the load generator only talks to loopback")
    outcome = asyncio.run(
        run(args.host, args.port, args.path, args.clients, args.requests, args.warmup, args.timeout)
    )
    json.dump(summarize(outcome["results"], outcome["wall_s"]), sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())

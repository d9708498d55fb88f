"""In-process cost of one sidebar page and one ``/health`` with N sessions, the way streaming turns leave it:
each timed request follows a change to one row (a turn's checkpoint), and again with nothing changed.

Each (checkout, N) runs in its own process with that checkout first on ``sys.path``, so this checkout and
another one (``--checkout ../other``, to compare) are measured by the same code. The rows are put in the
index as saves put them (``session_index.note_saved`` with ``Session.compact()`` rows), without writing
N files; the index flush runs before each timed call, never during it.

    .venv/bin/python bench/bench_sidebar.py                          # 2,000 and 20,000 sessions
    .venv/bin/python bench/bench_sidebar.py --sessions 2000,20000 --runs 15 --checkout ../other
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


class _Handler:
    """Just enough of ``BaseHTTPRequestHandler`` for a route handler."""

    def __init__(self) -> None:
        import io

        self.wfile = io.BytesIO()
        self.headers: dict = {}
        self.client_address = ("127.0.0.1", 0)

    def send_response(self, status: int) -> None:
        self.status = status

    def send_header(self, key: str, value: str) -> None:
        pass

    def end_headers(self) -> None:
        pass


def worker(sessions: int, runs: int, limit: int) -> dict:
    from api import config, models
    from api.services import session_views
    from api.web import routes

    config.configure(config.load_settings())  # the temp HERMES_HOME and state folder the parent chose
    session_dir = Path(tempfile.mkdtemp(prefix="talaria-bench-sidebar-")) / "sessions"
    session_dir.mkdir()
    models.SESSION_DIR, models.SESSION_INDEX_FILE = session_dir, session_dir / "_index.json"
    index_file = session_dir / "_index.json"
    base = time.time() - sessions
    for n in range(sessions):
        row = models.Session(session_id=f"b{n:06d}", title=f"Session {n}", updated_at=base + n).compact()
        models.store().index.note_saved(session_dir, index_file, row, (100, n))
    models.store().index.flush()

    def note_change(n: int) -> None:
        row = models.Session(session_id=f"b{n:06d}", title="streaming", updated_at=time.time()).compact()
        models.store().index.note_saved(session_dir, index_file, row, (200, n))

    def change(n: int) -> None:
        note_change(n)
        models.store().index.flush()

    def page() -> None:
        b"".join(session_views.sessions_page_json(limit, None))

    def health() -> None:
        routes._handle_health(_Handler(), {})

    def timed(call, before=None) -> float:
        samples = []
        for n in range(runs + 1):
            if before is not None:
                before(n)
            t0 = time.perf_counter()
            call()
            if n:  # the first is a warm-up
                samples.append((time.perf_counter() - t0) * 1000)
        return round(statistics.median(samples), 3)

    return {
        "sessions": sessions,
        "page_after_change_ms": timed(page, change),
        "page_unchanged_ms": timed(page),
        "health_after_change_ms": timed(health, change),
        "health_unchanged_ms": timed(health),
        # Not on a request's path (a timer thread, every index_flush_delay while rows change), but it holds
        # the interpreter while it encodes.
        "index_flush_after_change_ms": timed(models.store().index.flush, note_change),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sessions", default="2000,20000", help="comma-separated session counts")
    parser.add_argument("--runs", type=int, default=15, help="timed calls per measurement (median)")
    parser.add_argument("--limit", type=int, default=100, help="the page's limit")
    parser.add_argument("--checkout", type=Path, default=REPO, help="the checkout to measure")
    parser.add_argument("--_worker", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args._worker is not None:
        print(json.dumps(worker(args._worker, args.runs, args.limit)))
        return 0
    checkout = args.checkout.resolve()
    print(f"checkout {checkout}: median of {args.runs} calls, page limit {args.limit}")
    print(
        f"{'sessions':>9} {'page after change':>18} {'page unchanged':>15} {'health after change':>20} {'health':>8} {'index flush':>12}"
    )
    for count in (int(c) for c in args.sessions.split(",")):
        env = dict(
            os.environ,
            PYTHONPATH=str(checkout),
            HERMES_HOME=tempfile.mkdtemp(prefix="talaria-bench-home-"),
            HERMES_WEBUI_STATE_DIR=tempfile.mkdtemp(prefix="talaria-bench-state-"),
        )
        cmd = [
            sys.executable,
            str(Path(__file__).resolve()),
            "--_worker",
            str(count),
            "--runs",
            str(args.runs),
        ]
        cmd += ["--limit", str(args.limit)]
        done = subprocess.run(cmd, env=env, cwd=checkout, capture_output=True, text=True, check=True)
        m = json.loads(done.stdout.strip().splitlines()[-1])
        print(
            f"{count:>9} {m['page_after_change_ms']:>15} ms {m['page_unchanged_ms']:>12} ms"
            f" {m['health_after_change_ms']:>17} ms {m['health_unchanged_ms']:>5} ms"
            f" {m['index_flush_after_change_ms']:>9} ms"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""A project's view of the sidebar beside the unfiltered page, at 20,000 sessions: ``GET /api/sessions?
project_id=...&limit=100`` through the real server (client-side time of the whole request on 127.0.0.1, and
the server's own ``Server-Timing`` app time), for a small project (100 sessions spread over the whole
history) and a large one (a quarter of all sessions), its second page, and the unfiltered first page. Beside
them, in this process, the walk a filter without the per-project order would need (every row read,
newest first, until 100 of the project's are found).

The sessions are written without the store's fsyncs (the same bytes, a fixture), in a temp folder removed
after.

    .venv/bin/python bench/bench_projects.py                      # 20,000 sessions, 30 runs
    .venv/bin/python bench/bench_projects.py --sessions 2000,20000 --runs 50
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.workspace_fixture import header, interleaved_ms, row, timed_get  # noqa: E402
from talaria_testing.server_proc import ServerProc  # noqa: E402

SMALL, LARGE = "smallproject", "largeproject"


def project_of(i: int) -> str | None:
    if i % 200 == 7:
        return SMALL
    return LARGE if i % 4 == 0 else None


def bind(srv: ServerProc) -> None:
    """This process's settings name the server's folders (never the person's ``~/.hermes``)."""
    from api.store import config

    srv.hermes_home.mkdir(parents=True, exist_ok=True)
    srv.session_dir.mkdir(parents=True, exist_ok=True)
    os.environ["HERMES_HOME"], os.environ["HERMES_WEBUI_STATE_DIR"] = str(srv.hermes_home), str(srv.state_dir)
    config.configure(config.load_settings())


def populate(srv: ServerProc, count: int) -> None:
    """``count`` two-message sessions, some in the two projects, then one index rebuild; ``projects.json``."""
    import api.models as models
    from api.rules import jsonio

    bind(srv)
    session_dir = srv.session_dir
    assert Path(models.SESSION_DIR) == session_dir, models.SESSION_DIR
    base = time.time() - count * 60
    for i in range(count):
        at = base + i * 60
        rows = [
            {"role": "user", "content": f"question {i}", "timestamp": at},
            {"role": "assistant", "content": f"answer {i}", "timestamp": at + 1},
        ]
        session = models.Session(
            title=f"Session {i}", messages=rows, created_at=at, updated_at=at + 1, project_id=project_of(i)
        )
        session.path.write_bytes(jsonio.dumps_document(session.to_payload()))
    models.store().index.rebuild_index_file(session_dir)
    projects = [
        {"project_id": pid, "name": pid, "color": "#0090ff", "created_at": base} for pid in (SMALL, LARGE)
    ]
    (srv.state_dir / "projects.json").write_text(json.dumps(projects))


def walk_filter(project: str, limit: int) -> list[dict]:
    """A filter without the per-project order: every row newest first until ``limit`` of the project's."""
    import api.models as models

    found = []
    for found_row in models.store().newest_first():
        if found_row.get("project_id") == project:
            found.append(found_row)
            if len(found) == limit:
                break
    return found


def measure(count: int, runs: int, limit: int) -> None:
    with tempfile.TemporaryDirectory(prefix="talaria-bench-projects-") as root:
        srv = ServerProc(Path(root))
        populate(srv, count)
        with srv:
            app: dict[str, list[float]] = {}
            urls = {
                "unfiltered first page": f"/api/sessions?limit={limit}",
                "small project (100 sessions)": f"/api/sessions?project_id={SMALL}&limit={limit}",
                f"large project ({count // 4} sessions)": f"/api/sessions?project_id={LARGE}&limit={limit}",
            }
            first = json.loads(srv.request("GET", urls[f"large project ({count // 4} sessions)"])[2])
            urls["large project, second page"] = (
                f"/api/sessions?project_id={LARGE}&limit={limit}&cursor={first['next_cursor']}"
            )
            calls = {label: timed_get(srv, url, app.setdefault(label, [])) for label, url in urls.items()}
            calls["walk filter, small (in-process)"] = lambda: walk_filter(SMALL, limit)
            calls["walk filter, large (in-process)"] = lambda: walk_filter(LARGE, limit)
            found = interleaved_ms(calls, runs)
        print(header(f"{count} sessions, limit {limit}, {runs} runs (client time)"))
        for label, values in found.items():
            print(row(label, values))
        print(header("  the server's own time (Server-Timing app)"))
        for label, values in app.items():
            print(row(label, values[1:]))  # the untimed round first


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sessions", default="20000", help="comma-separated session counts")
    parser.add_argument("--runs", type=int, default=30, help="timed requests per measurement")
    parser.add_argument("--limit", type=int, default=100, help="the page's limit")
    args = parser.parse_args(argv)
    for count in (int(c) for c in args.sessions.split(",")):
        measure(count, args.runs, args.limit)
    return 0


if __name__ == "__main__":
    sys.exit(main())

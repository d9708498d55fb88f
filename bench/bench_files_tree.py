"""The files panel's tree of a 100,000-file repository in Chromium, beside the floor of its requests.

The workspace is a git repository (``--files`` files, committed; ``--no-git`` for a plain folder): four
top-level files, ``docs/``, ``big/`` with 10,000 files (``--big``) and ``src/pkg-NNN/mod-NN/`` folders of
100 files. Each run loads the session's page afresh in Debian's Chromium (headless, through Playwright),
then times in the page, from the click to the frame after the rows are in the document:

1. opening the files panel until every entry of the first level is shown, then painted, and the longest
   main-thread task meanwhile (a 'longtask' of 50 ms or more; 0 when none);
2. expanding ``big/`` until its first entry is shown (its 10,000 rows, or as many as the panel renders),
   then painted, and the longest task meanwhile;
3. collapsing it again until its rows are gone.

Beside them, the floor: the same ``GET /api/list`` requests fetched and parsed in the page, nothing drawn.
The goal (issue 23) is 300 ms for the tree to open. The fixture is made in a temp folder (a minute or so
on a busy machine) and removed after.

    .venv/bin/python bench/bench_files_tree.py                 # 100,000 files, 7 runs
    .venv/bin/python bench/bench_files_tree.py --runs 11 --files 100000 --big 10000 --no-git
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.workspace_fixture import header, repository, row  # noqa: E402
from talaria_testing.server_proc import ServerProc  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run"]

# Clicks ``click`` and answers the ms until ``done()`` holds (checked on every change to the panel), until
# the frame after it (a rAF, then a task: the frame that shows it has been painted), and the longest task
# the main thread ran meanwhile (the page answers no input during it).
TIMED_CLICK = """async ([click, wanted, gone]) => {
  const tasks = [];
  const watch = new PerformanceObserver((list) => tasks.push(...list.getEntries().map((e) => e.duration)));
  watch.observe({ type: 'longtask', buffered: false });
  const panel = document.getElementById('files-panel');
  const has = (path) => panel.querySelector(`[data-path="${CSS.escape(path)}"]`) !== null;
  const done = () => wanted.every(has) && !gone.some(has);
  const started = performance.now();
  if (done()) throw new Error(`already so before ${click} was clicked`);
  const shown = new Promise((resolve, reject) => {
    const observer = new MutationObserver(() => {
      if (done()) { observer.disconnect(); resolve(performance.now()); }
    });
    observer.observe(panel, { childList: true, subtree: true, attributes: true });
    setTimeout(() => { observer.disconnect(); reject(new Error(`${click}: not done in 60 s`)); }, 60000);
  });
  document.querySelector(click).click();
  const at = await shown;
  await new Promise((resolve) => requestAnimationFrame(() => setTimeout(resolve, 0)));
  const painted = performance.now() - started;
  await new Promise((resolve) => setTimeout(resolve, 0));  // the observer is told of the last task late
  watch.disconnect();
  return { shown: at - started, painted, longest: Math.max(0, ...tasks) };
}"""

FETCH_FLOOR = """async (queries) => {
  const started = performance.now();
  for (const query of queries) {
    const answer = await fetch(`/api/list?${new URLSearchParams(query)}`);
    await answer.json();
  }
  return performance.now() - started;
}"""


def git_repository(folder: Path) -> None:
    env = {
        **os.environ,
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_CONFIG_SYSTEM": os.devnull,
        "GIT_AUTHOR_NAME": "bench",
        "GIT_AUTHOR_EMAIL": "bench@example.invalid",
        "GIT_COMMITTER_NAME": "bench",
        "GIT_COMMITTER_EMAIL": "bench@example.invalid",
    }
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "fixture"]):
        subprocess.run(["git", *args], cwd=folder, env=env, check=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--files", type=int, default=100_000)
    parser.add_argument("--big", type=int, default=10_000)
    parser.add_argument("--no-git", action="store_true", help="a plain folder, not a git repository")
    opts = parser.parse_args(argv)

    from playwright.sync_api import sync_playwright

    made = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="talaria-bench-tree-") as tmp:
        root = Path(tmp)
        workspace = root / "workspace"
        workspace.mkdir()
        counts = repository(workspace, opts.files, opts.big)
        if not opts.no_git:
            git_repository(workspace)
        made = time.perf_counter() - made
        first_level = sorted(p.name for p in workspace.iterdir() if not p.name.startswith("."))
        first_big = min(p.name for p in (workspace / "big").iterdir())
        timings: dict[str, list[float]] = {}

        def note(label: str, value: float) -> None:
            timings.setdefault(label, []).append(value)

        with ServerProc(root) as server, sync_playwright() as pw:
            sid = server.post_json("/api/session/new", {})["session"]["session_id"]
            browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
            try:
                page = browser.new_page(viewport={"width": 1280, "height": 800})
                for run in range(opts.runs + 1):  # the first is a warm-up
                    page.goto("about:blank")  # else a goto that changes only the hash keeps the page
                    page.goto(f"{server.base_url}/#/s/{sid}")
                    page.wait_for_selector("#files-toggle:not([hidden])")
                    opened = page.evaluate(TIMED_CLICK, ["#files-toggle", first_level, []])
                    big = f"big/{first_big}"
                    expanded = page.evaluate(TIMED_CLICK, ['#files-panel [data-path="big"]', [big], []])
                    rows = page.locator('#files-panel [data-path^="big/"]').count()
                    collapsed = page.evaluate(TIMED_CLICK, ['#files-panel [data-path="big"]', ["big"], [big]])
                    root_floor = page.evaluate(FETCH_FLOOR, [{"session_id": sid, "path": ""}])
                    big_floor = page.evaluate(
                        FETCH_FLOOR, [{"session_id": sid, "path": ""}, {"session_id": sid, "path": "big"}]
                    )
                    if run == 0:
                        continue
                    note("open the panel: first level shown", opened["shown"])
                    note("  open: and painted", opened["painted"])
                    note("  open: the longest main-thread task", opened["longest"])
                    note("  floor: fetch + parse of the root's list", root_floor)
                    note(f"expand big/: first entry shown ({rows:,} rows)", expanded["shown"])
                    note("  expand: and painted", expanded["painted"])
                    note("  expand: the longest main-thread task", expanded["longest"])
                    note("  floor: fetch + parse of the root's and big/'s", big_floor)
                    note("collapse big/: its rows gone", collapsed["shown"])
                    note("  collapse: and painted", collapsed["painted"])
            finally:
                browser.close()
    print(
        f"{opts.runs} runs after one warm-up, a fresh page each; {os.cpu_count()} cores, shared; fixture"
        f" of {counts['files']:,} files ({'plain folder' if opts.no_git else 'git repository'}) made in"
        f" {made:.0f} s"
    )
    print(header(f"the files panel's tree in Chromium, first level of {len(first_level)} entries", width=48))
    for label, values in timings.items():
        print(row(label, values, width=48))
    return 0


if __name__ == "__main__":
    sys.exit(main())

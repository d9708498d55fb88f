"""One report of Talaria's durability and speed: ``artifacts/durability-report.md``.

Runs the durability suite in full (``tests/durability --durability-full``: kill matrix, crash states,
faults, concurrency, hostile input and fuzzing, load), every benchmark in ``bench/`` and, when given
``--core-bench PATH``, an outside benchmark of the session core run against this checkout; then writes
the Markdown report and prints its summary.

    .venv/bin/python -m bench.report                  # everything (about 15-25 minutes on 2 cores)
    .venv/bin/python -m bench.report --reduced        # the suite as CI runs it, benchmarks too
    .venv/bin/python -m bench.report --no-bench       # the suite only
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
ARTIFACTS = REPO / "artifacts"
BENCH_TIMEOUT_S = 1800
SUITE_TIMEOUT_S = 3600


def _python() -> str:
    venv = REPO / ".venv" / "bin" / "python"
    return str(venv) if venv.exists() else sys.executable


def _run(cmd: list[str], timeout: float) -> dict:
    started = time.monotonic()
    try:
        done = subprocess.run(
            cmd, cwd=REPO, capture_output=True, text=True, errors="replace", timeout=timeout
        )
        rc, out = done.returncode, done.stdout + (("\n" + done.stderr) if done.stderr.strip() else "")
    except subprocess.TimeoutExpired as exc:
        rc, out = "timeout", (exc.stdout or "") if isinstance(exc.stdout, str) else ""
    return {"cmd": cmd, "rc": rc, "seconds": round(time.monotonic() - started, 1), "output": out}


def run_suite(full: bool, counters_path: Path) -> dict:
    cmd = [
        _python(),
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "tests/durability",
        "--durability-json",
        str(counters_path),
    ]
    if full:
        cmd.append("--durability-full")
    result = _run(cmd, SUITE_TIMEOUT_S)
    result["failed"] = re.findall(r"^FAILED (\S+)", result["output"], re.M)
    tail = [line for line in result["output"].splitlines() if re.search(r"\d+ (passed|failed)", line)]
    result["summary"] = tail[-1].strip("= ") if tail else "no summary line"
    try:
        result["counters"] = json.loads(counters_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        result["counters"] = {"sections": {}, "violations": []}
    return result


def run_benchmarks(core_bench: Path | None = None) -> list[dict]:
    out = []
    for path in sorted((REPO / "bench").glob("bench_*.py")):
        result = _run([_python(), str(path.relative_to(REPO))], BENCH_TIMEOUT_S)
        result["name"] = path.stem
        out.append(result)
    if core_bench is not None:
        result = _run(
            [sys.executable, str(core_bench), "--impl", ".", "--python", _python()], BENCH_TIMEOUT_S
        )
        result["name"] = core_bench.stem
        out.append(result)
    return out


# ---------------------------------------------------------------------- Markdown


def _get(sections: dict, section: str, key: str, default="–"):
    return sections.get(section, {}).get(key, default)


def summary_rows(counters: dict) -> list[tuple[str, str, str]]:
    s = counters.get("sections", {})
    kills = _get(s, "kill_matrix", "kill_points", 0)
    states = _get(s, "crash_states", "states_checked", 0)
    return [
        (
            "Kill points (SIGKILL at each durable step + random moments)",
            str(kills),
            str(_get(s, "kill_matrix", "violations", 0)),
        ),
        (
            "Crash states (power-loss model, every state checked)",
            str(states),
            str(_get(s, "crash_states", "violations", 0)),
        ),
        (
            "Faults injected (disk full, read-only, I/O error)",
            str(_get(s, "faults", "faults_injected", 0)),
            str(_get(s, "faults", "violations", 0)),
        ),
        (
            f"Concurrency operations (threads: {_get(s, 'concurrency', 'threads')})",
            str(_get(s, "concurrency", "operations", 0)),
            str(_get(s, "concurrency", "violations", 0)),
        ),
        (
            "Fuzzed requests (in-process, every route)",
            str(_get(s, "hostile_input", "fuzzed_requests", 0)),
            str(_get(s, "hostile_input", "fuzz_500s", 0)) + " × 500",
        ),
        (
            "Hostile files / state.db / id requests",
            f"{_get(s, 'hostile_input', 'hostile_files', 0)} / {_get(s, 'hostile_input', 'hostile_state_dbs', 0)}"
            f" / {_get(s, 'hostile_input', 'hostile_id_requests', 0)}",
            str(_get(s, "hostile_input", "violations", 0)),
        ),
        (
            "Model-based turn steps (real server and agent, fake LLM; seconds)",
            f"{_get(s, 'turns_model', 'steps', 0)} ({_get(s, 'turns_model', 'seconds')})",
            str(_get(s, "turns_model", "violations", 0)),
        ),
        (
            "Load: requests (p50 / p99 ms)",
            f"{_get(s, 'load', 'requests')} ({_get(s, 'load', 'p50_ms')} / {_get(s, 'load', 'p99_ms')})",
            f"{_get(s, 'load', 'errors')} errors",
        ),
    ]


def _table(rows: list[tuple], header: tuple) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return lines


def _section_details(counters: dict) -> list[str]:
    lines = []
    for name, values in sorted(counters.get("sections", {}).items()):
        lines += ["", f"### {name.replace('_', ' ')}", ""]
        rows = [(k, json.dumps(v) if isinstance(v, (dict, list)) else v) for k, v in sorted(values.items())]
        lines += _table(rows, ("counter", "value"))
    return lines


def render(suite: dict, benches: list[dict], full: bool) -> str:
    counters = suite.get("counters", {})
    lines = [
        "# Talaria durability report",
        "",
        f"Generated {time.strftime('%Y-%m-%d %H:%M:%S %Z')} by `python -m bench.report`"
        f" ({'full' if full else 'reduced'} suite) on {platform.node()}: {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}, {platform.system()} {platform.release()}.",
        "",
        "## Summary",
        "",
        *_table(summary_rows(counters), ("what", "count", "violations")),
        "",
        f"Suite: {suite['summary']} (wall clock {suite['seconds']} s, exit {suite['rc']}).",
    ]
    if suite["failed"]:
        lines += ["", "Failing tests (each is a reproducer of a broken promise or a missing behaviour):", ""]
        lines += [f"- `{t}`" for t in suite["failed"]]
    violations = counters.get("violations", [])
    if violations:
        lines += ["", "## Violations (first 200 kept)", ""]
        lines += [f"- **{v['section']}** — {v['where']}: {v['text']}" for v in violations]
    lines += ["", "## Counters", *_section_details(counters)]
    lines += ["", "## Benchmarks", ""]
    if not benches:
        lines.append("Not run (`--no-bench`).")
    for b in benches:
        cmd = " ".join(Path(c).name if i == 0 else c for i, c in enumerate(b["cmd"]))
        lines += [
            f"### {b['name']}",
            "",
            f"`{cmd}` — {b['seconds']} s, exit {b['rc']}",
            "",
            "```",
            b["output"].strip()[-12000:],
            "```",
            "",
        ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.report",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--reduced", action="store_true", help="run the suite in its reduced (CI) form")
    parser.add_argument("--no-bench", action="store_true", help="skip the benchmarks")
    parser.add_argument("--out", type=Path, default=ARTIFACTS / "durability-report.md")
    parser.add_argument(
        "--core-bench", type=Path, help="also run this session-core benchmark script (--impl . --python ...)"
    )
    args = parser.parse_args(argv)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    counters_path = args.out.with_suffix(".json")
    full = not args.reduced
    suite = run_suite(full, counters_path)
    benches = [] if args.no_bench else run_benchmarks(args.core_bench)
    args.out.write_text(render(suite, benches, full), encoding="utf-8")
    print("\n".join(_table(summary_rows(suite["counters"]), ("what", "count", "violations"))))
    print(
        f"\nsuite: {suite['summary']} (wall clock {suite['seconds']} s); benchmarks: "
        + ", ".join(f"{b['name']} {b['seconds']} s (exit {b['rc']})" for b in benches)
    )
    print(f"report: {args.out}")
    return 0 if suite["rc"] == 0 and all(b["rc"] == 0 for b in benches) else 1


if __name__ == "__main__":
    raise SystemExit(main())

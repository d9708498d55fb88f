"""Benchmark: what streaming long answers costs the server and a reader.

The real server runs as a subprocess with the real hermes-agent talking to the fake LLM in this
process, which streams a Markdown answer of ``--chars`` characters word by word (headings, paragraphs,
lists, code fences, tables). Per run, on a fresh server, ``--answers`` such answers stream one after
another into one session, each followed live by one SSE reader. Measured:

- the server's resident memory (VmRSS) before the first answer and after the last one;
- the bytes a reader following the answer live downloads, and how many ``render`` events it got;
- the journal's size: the bytes a reader that joins after the turn ended downloads when it replays
  the stream from the start (what the server keeps of the turn for resuming readers);
- the server's CPU time (user + system) while one answer streams (mostly the agent's own work per token);
- the rendering alone, in this process: the CPU time ``api.services.live_render.LiveRender`` takes to render the
  answer as it grows, rendering after every ``--render-step`` characters (``--render-only`` runs just this).

Each run also checks that the saved answer is the scripted text. Each figure is the median over
``--runs`` runs.

    .venv/bin/python bench/bench_stream.py [--runs 3] [--answers 4] [--chars 600000] [--render-only]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from proc_cpu import cpu_seconds  # noqa: E402

from talaria_testing.fake_llm import FakeLLM, Reply, agent_server  # noqa: E402
from talaria_testing.server_proc import ServerProc  # noqa: E402

_PAGE = os.sysconf("SC_PAGE_SIZE")


def markdown_answer(chars: int, serial: int) -> str:
    """A long Markdown answer of about ``chars`` characters, unique per ``serial``."""
    parts: list[str] = []
    size = 0
    i = 0
    while size < chars:
        block = (
            f"## Part {serial}.{i}\n\n"
            f"This paragraph explains step {i} with **bold words**, `inline code` and a link to "
            f"https://example.com/{serial}/{i}. It goes on for a while so that the paragraph is of a "
            "realistic length, as an assistant's answer would be.\n\n"
            f"- first point of part {i}\n- second point with *emphasis*\n- third point\n\n"
            f"```python\ndef step_{i}(value):\n    return value * {i} + 1\n```\n\n"
            f"| column | value |\n|---|---|\n| a | {i} |\n| b | {i * 2} |\n\n"
        )
        parts.append(block)
        size += len(block)
        i += 1
    return "".join(parts)[:chars].rstrip() + "\n\nThe end."


def rss_bytes(pid: int) -> int:
    fields = Path(f"/proc/{pid}/statm").read_text().split()
    return int(fields[1]) * _PAGE


def read_stream(srv: ServerProc, stream_id: str) -> tuple[int, int, list[tuple[str, str]]]:
    """Reads a turn's SSE stream to its end: (bytes, render events, [(event, data)] of the last events)."""
    conn = http.client.HTTPConnection(srv.host, srv.port, timeout=600)
    total = renders = 0
    tail: list[tuple[str, str]] = []
    name = ""
    try:
        conn.request("GET", f"/api/chat/stream?stream_id={stream_id}")
        resp = conn.getresponse()
        while True:
            line = resp.readline()
            if not line:
                break
            total += len(line)
            if line.startswith(b"event: "):
                name = line[7:].strip().decode()
                renders += name == "render"
            elif line.startswith(b"data: ") and name in ("done", "error"):
                tail.append((name, line[6:].decode()))
    finally:
        conn.close()
    return total, renders, tail


def one_run(fake: FakeLLM, opts) -> dict:
    with tempfile.TemporaryDirectory(prefix="talaria-bench-stream-") as tmp:
        srv = agent_server(Path(tmp), fake.base_url)
        srv.start()
        try:
            assert srv.proc is not None
            pid = srv.proc.pid
            sid = srv.post_json("/api/session/new", {})["session"]["session_id"]
            fake.script(Reply(text="warm"))  # imports the agent and builds it once
            read_stream(
                srv, srv.post_json("/api/chat/start", {"session_id": sid, "message": "hi"})["stream_id"]
            )
            time.sleep(1.0)
            rss_before = rss_bytes(pid)
            live, journal, renders, cpu = [], [], [], []
            for k in range(opts.answers):
                answer = markdown_answer(opts.chars, k)
                fake.script(Reply(text=answer))
                cpu_start = cpu_seconds(pid)
                stream_id = srv.post_json("/api/chat/start", {"session_id": sid, "message": f"answer {k}"})[
                    "stream_id"
                ]
                size, count, tail = read_stream(srv, stream_id)
                cpu.append(cpu_seconds(pid) - cpu_start)
                assert tail and tail[-1][0] == "done", tail
                done = json.loads(tail[-1][1])["session"]
                saved = [m for m in done["messages"] if m.get("role") == "assistant"][-1]["content"]
                assert saved == answer, "the saved answer differs from the scripted one"
                live.append(size)
                renders.append(count)
                journal.append(read_stream(srv, stream_id)[0])
            time.sleep(1.0)
            rss_after = rss_bytes(pid)
        finally:
            srv.stop()
    return {
        "rss_before_mb": rss_before / 2**20,
        "rss_after_mb": rss_after / 2**20,
        "rss_growth_mb": (rss_after - rss_before) / 2**20,
        "live_reader_mb": statistics.median(live) / 2**20,
        "render_events": statistics.median(renders),
        "journal_replay_mb": statistics.median(journal) / 2**20,
        "server_cpu_s": statistics.median(cpu),
    }


def render_cpu(chars: int, step: int) -> tuple[float, int]:
    """CPU seconds LiveRender spends rendering an answer fed ``step`` characters at a time, and the
    characters of HTML or text its render events carry."""
    from api.services.live_render import LiveRender
    from api.store import config

    with tempfile.TemporaryDirectory(prefix="talaria-bench-render-") as home:
        config.configure(config.load_settings(environ={"HERMES_HOME": home, "HERMES_WEBUI_STATE_DIR": home}))
        events: list[dict] = []
        ticks = iter(range(0, 10**12, 1000))  # every piece arrives long after the previous render
        live = LiveRender(
            lambda name, data: events.append(data) if name == "render" else None, 0.0, lambda: next(ticks)
        )
        text = markdown_answer(chars, 0)
        started = time.process_time()
        for start in range(0, len(text), step):
            live("token", {"text": text[start : start + step]})
        live.close()
        spent = time.process_time() - started
        carried = sum(
            len(d.get("html") or d.get("plain") or "") + sum(map(len, d.get("blocks") or [])) for d in events
        )
    return spent, carried


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--answers", type=int, default=4)
    parser.add_argument("--chars", type=int, default=600_000)
    parser.add_argument("--render-step", type=int, default=2000)
    parser.add_argument("--render-only", action="store_true")
    opts = parser.parse_args(argv)
    rendered = [render_cpu(opts.chars, opts.render_step) for _ in range(opts.runs)]
    print(
        f"rendering one {opts.chars:,}-character answer every {opts.render_step:,} characters, median of "
        f"{opts.runs}: {statistics.median(r[0] for r in rendered):.2f} s CPU, "
        f"{statistics.median(r[1] for r in rendered) / 2**20:.1f} MB carried by render events",
        flush=True,
    )
    if opts.render_only:
        return 0
    fake = FakeLLM().start()
    try:
        runs = []
        for n in range(opts.runs):
            runs.append(one_run(fake, opts))
            print(f"run {n + 1}: " + ", ".join(f"{k} {v:.1f}" for k, v in runs[-1].items()), flush=True)
    finally:
        fake.stop()
    print(f"median of {opts.runs} runs, {opts.answers} answers of {opts.chars:,} characters each:")
    for key in runs[0]:
        print(f"  {key:18} {statistics.median(r[key] for r in runs):10.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

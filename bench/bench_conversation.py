"""Benchmark: the conversation in Chromium — token to rendered text, main-thread long tasks while
streaming, and opening a 5,000-message session.

The real server runs as a subprocess with the real hermes-agent, talking to a fake LLM in this process
whose handler notes the wall-clock time each token chunk is written to its socket. The page (Debian's
Chromium through Playwright) notes, for every token marker, the animation frame in which it first
appears in the rendered answer (``performance.timeOrigin + now``: the same wall clock). Measured, each
as the median over ``--runs`` runs, beside its floor:

1. token → visible rendered: p50 and p99 of (frame time − socket write time). Floor: the same tokens
   read by a plain SSE client in this process (the relay alone, without rendering).
2. long tasks (PerformanceObserver 'longtask') while the answer streams at ``--rate`` tokens/s: count
   and longest.
3. opening a 5,000-message session: the page's ``talaria:open`` measure (request → first frame).
   Floor: fetching and parsing the same first page of JSON in the page, without rendering.

    .venv/bin/python bench/bench_conversation.py [--runs 5] [--tokens 400] [--rate 100]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bench_chat import Reader, pct, reply, timed_fake  # noqa: E402
from talaria_testing.fake_llm import agent_server  # noqa: E402
from talaria_testing.server_proc import ServerProc  # noqa: E402
from talaria_testing.transcripts import long_transcript  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
LONG_MESSAGES = 5000

# Per token marker "r<serial>t<i> ": the wall-clock time of the frame in which it was first rendered.
WATCH = """() => {
  window.__seen = {};
  window.__long = [];
  new PerformanceObserver((list) => {
    for (const e of list.getEntries()) window.__long.push(e.duration);
  }).observe({ type: 'longtask', buffered: false });
  const pattern = /r\\d+t\\d+/g;
  let pending = false;
  new MutationObserver(() => {
    if (pending) return;
    pending = true;
    requestAnimationFrame(() => {
      pending = false;
      const now = performance.timeOrigin + performance.now();
      for (const body of document.querySelectorAll('.msg.live .live-text')) {
        for (const m of body.textContent.matchAll(pattern)) if (!(m[0] in window.__seen)) window.__seen[m[0]] = now;
      }
    });
  }).observe(document.getElementById('messages'), { childList: true, subtree: true, characterData: true });
}"""

OPEN_FLOOR = """async (sid) => {
  const t0 = performance.now();
  const r = await fetch(`/api/session?session_id=${sid}&msg_limit=100`);
  await r.json();
  return performance.now() - t0;
}"""


def start_server(root: Path, llm) -> ServerProc:
    return agent_server(root, llm.base_url).start()


def stream_run(page, server: ServerProc, llm, sent: dict, tokens: int, rate: float) -> dict:
    sid = server.post_json("/api/session/new", {})["session"]["session_id"]
    page.goto(f"{server.base_url}/#/s/{sid}")
    page.wait_for_selector("#app:not([hidden])")
    page.evaluate(WATCH)
    llm.script(reply(tokens, 1.0 / rate))
    before = int(page.locator("#transcript").get_attribute("data-turns-done") or 0)
    box = page.locator("#composer-input")
    box.fill("Stream please")
    box.press("Enter")
    # The floor: a plain SSE client on the same turn reads the relayed tokens without rendering.
    page.wait_for_selector(".msg.live", timeout=60000)
    stream_id = server.get_json(f"/api/session?session_id={sid}&msg_limit=1")["session"]["active_stream_id"]
    floor_reader = Reader(server, stream_id) if stream_id else None
    reader_started = time.time()
    if floor_reader:
        floor_reader.start()
    page.wait_for_function(
        "(n) => Number(document.getElementById('transcript').dataset.turnsDone || 0) > n",
        arg=before,
        timeout=120000,
    )
    seen = page.evaluate("window.__seen")
    delays = [(seen[tok.strip()] / 1000 - sent[tok]) * 1000 for tok in sent if tok.strip() in seen]
    floor = []
    if floor_reader:
        floor_reader.done.wait(30)
        # The reader notes perf_counter times; tokens sent before it connected arrive replayed, not relayed.
        offset = time.time() - time.perf_counter()
        floor = [
            (t + offset - sent[tok]) * 1000
            for tok, t in floor_reader.received.items()
            if tok in sent and sent[tok] > reader_started + 0.2
        ]
    long_tasks = page.evaluate("window.__long")
    sent.clear()
    return {"delays": delays, "floor": floor, "long": long_tasks}


CALIBRATE = """() => new Promise((resolve) => {
  const seen = [];
  const observer = new PerformanceObserver((list) => seen.push(...list.getEntries().map((e) => e.duration)));
  observer.observe({ type: 'longtask', buffered: false });
  setTimeout(() => { const end = performance.now() + 80; while (performance.now() < end) {} }, 0);
  setTimeout(() => { observer.disconnect(); resolve(seen); }, 400);
})"""


def open_run(page, server: ServerProc, sid: str) -> tuple[float, float]:
    page.goto(f"{server.base_url}/")
    page.wait_for_selector("#session-list .session-row", state="attached")
    page.locator(f'.session-row[data-sid="{sid}"] .session-open').click()
    page.wait_for_function("() => performance.getEntriesByName('talaria:open').length > 0")
    opened = page.evaluate("performance.getEntriesByName('talaria:open')[0].duration")
    floor = page.evaluate(OPEN_FLOOR, sid)
    return opened, floor


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--tokens", type=int, default=400)
    parser.add_argument("--rate", type=float, default=100.0, help="tokens per second")
    args = parser.parse_args(argv)

    from playwright.sync_api import sync_playwright

    sent: dict[str, float] = {}
    with (
        tempfile.TemporaryDirectory() as tmp,
        timed_fake(sent, clock=time.time) as llm,
        sync_playwright() as pw,
    ):
        server = start_server(Path(tmp) / "srv", llm)
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        try:
            long_sid = server.post_json(
                "/api/session/import", {"title": "Five thousand", "messages": long_transcript(LONG_MESSAGES)}
            )["session"]["session_id"]
            context = browser.new_context(viewport={"width": 1280, "height": 800})
            page = context.new_page()
            page.goto(f"{server.base_url}/")
            page.wait_for_selector("#app:not([hidden])")
            calibration = page.evaluate(CALIBRATE)
            assert calibration and max(calibration) >= 50, f"the longtask observer saw {calibration}"
            p50s, p99s, floor50s, floor99s, counts, longest, opens, open_floors = ([] for _ in range(8))
            for _ in range(args.runs):
                run = stream_run(page, server, llm, sent, args.tokens, args.rate)
                p50s.append(pct(run["delays"], 50))
                p99s.append(pct(run["delays"], 99))
                if run["floor"]:
                    floor50s.append(pct(run["floor"], 50))
                    floor99s.append(pct(run["floor"], 99))
                counts.append(len(run["long"]))
                longest.append(max(run["long"], default=0.0))
                opened, floor = open_run(page, server, long_sid)
                opens.append(opened)
                open_floors.append(floor)
            context.close()
        finally:
            browser.close()
            server.stop()
    med = statistics.median
    print(f"runs: {args.runs}; {args.tokens} tokens at {args.rate:.0f} tokens/s per run")
    print(f"longtask observer check: a deliberate 80 ms task was seen as {max(calibration):.0f} ms")
    print(
        f"token -> visible rendered: p50 {med(p50s):.1f} ms, p99 {med(p99s):.1f} ms"
        f"  (floor, SSE relay to a plain client: p50 {med(floor50s) if floor50s else float('nan'):.1f} ms,"
        f" p99 {med(floor99s) if floor99s else float('nan'):.1f} ms)"
    )
    print(
        f"long tasks while streaming: median count {med(counts):.0f}, longest {max(longest):.1f} ms"
        f" (median of the runs' longest {med(longest):.1f} ms); per run: "
        + ", ".join(f"{c} ({m:.0f} ms)" for c, m in zip(counts, longest, strict=True))
    )
    print(
        f"open a {LONG_MESSAGES:,}-message session: median {med(opens):.0f} ms"
        f" (floor, fetch + parse of the same page of JSON: {med(open_floors):.0f} ms); all runs: "
        + ", ".join(f"{v:.0f}" for v in opens)
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

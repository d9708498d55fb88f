"""Benchmark: the CPU a streamed answer costs per 1,000 tokens — the server's own stream work and the
whole server — each beside its floor.

- ``pipeline`` (in this process, no agent): ``--turns`` answers (Markdown, word-sized tokens) are fed at
  ``--rate`` tokens/s each through what the server does per token — the live render
  (``api.services.live_render``), the turn journal (``api.agent.turn_journal``) and the SSE relay (``api.web.sse``, one
  reader per turn writing to ``/dev/null``). Floor: the same tokens at the same rate, each written as
  its SSE frame straight to ``/dev/null`` (no render, no journal, no relay thread).
- ``server``: the real server and agent, the fake LLM in its own process streaming the same answers at
  ``--rate`` tokens/s, ``--turns`` turns at once, each followed by one SSE reader; the CPU of the server
  process and of any process under it (agent workers), per 1,000 tokens the readers received. Floor: the
  OpenAI client that hermes-agent uses, reading the same streams in a process of its own (the provider
  client's per-chunk parsing, which whoever runs the agent pays).

Each figure is the median of ``--runs`` runs.

    .venv/bin/python bench/bench_stream_cpu.py [--runs 3] [--turns 8] [--tokens 1000] [--rate 100]
    .venv/bin/python bench/bench_stream_cpu.py --pipeline-only
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from bench_many_turns import read_turn  # noqa: E402
from bench_stream import markdown_answer  # noqa: E402
from proc_cpu import tree_cpu_seconds  # noqa: E402

from talaria_testing.fake_llm_server import split_tokens  # noqa: E402


def answer_tokens(tokens: int, serial: int) -> list[str]:
    """A Markdown answer cut into about ``tokens`` word-sized tokens, as the fake LLM streams it."""
    return split_tokens(markdown_answer(tokens * 6, serial))[:tokens]


def _paced(pieces: list[str], rate: float, emit) -> None:
    """Calls ``emit`` with each piece, ``rate`` pieces a second (by the clock, so sleeps do not drift)."""
    started = time.monotonic()
    for i, piece in enumerate(pieces):
        delay = started + i / rate - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        emit(piece)


class _NullHandler:
    """What ``api.web.sse`` needs of a request handler, its stream going to ``/dev/null``."""

    def __init__(self) -> None:
        self.wfile = open("/dev/null", "wb", buffering=0)  # noqa: SIM115 - closed by the run

    def send_response(self, *_args) -> None:
        pass

    def send_header(self, *_args) -> None:
        pass

    def end_headers(self) -> None:
        pass


def pipeline_run(turns: int, tokens: int, rate: float) -> tuple[float, float]:
    """CPU seconds per 1,000 tokens of render + journal + relay, and of the floor (frames to /dev/null)."""
    from api.agent.turn_journal import Turn
    from api.services.live_render import LiveRender
    from api.web import sse

    answers = [answer_tokens(tokens, n) for n in range(turns)]

    def streamed(n: int) -> None:
        turn = Turn(f"stream-{n}", f"session-{n}")
        live = LiveRender(turn.append)
        handler = _NullHandler()
        reader = threading.Thread(target=sse.serve_turn_events, args=(handler, turn, None, 1.0))
        reader.start()
        _paced(answers[n], rate, lambda piece: live("token", {"text": piece}))
        live.close()
        turn.append("done", {"session": None})
        turn.finish()
        reader.join()
        handler.wfile.close()

    def floor(n: int) -> None:
        with open("/dev/null", "wb", buffering=0) as out:
            seq = iter(range(1, 10**9))
            _paced(answers[n], rate, lambda piece: out.write(sse.frame(next(seq), "token", {"text": piece})))

    figures = []
    for target in (streamed, floor):
        threads = [threading.Thread(target=target, args=(n,)) for n in range(turns)]
        started = time.process_time()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        figures.append((time.process_time() - started) * 1e6 / sum(map(len, answers)))
    return figures[0], figures[1]


# ---------------------------------------------------------------------- the real server


def server_run(turns: int, tokens: int, rate: float) -> dict:
    """Server (and descendants) CPU per 1,000 tokens while ``turns`` turns stream at once."""
    from talaria_testing.fake_llm import FakeLLMProcess, Reply, agent_server

    with tempfile.TemporaryDirectory(prefix="talaria-bench-stream-cpu-") as tmp:
        llm = FakeLLMProcess(Path(tmp) / "fake_llm.port")
        srv = agent_server(Path(tmp) / "srv", llm.base_url)
        srv.start()
        try:
            assert srv.proc is not None
            sids = [srv.post_json("/api/session/new", {})["session"]["session_id"] for _ in range(turns)]
            llm.script(Reply(text="warm"))  # imports and builds the agent before the clock starts
            warm = srv.post_json("/api/chat/start", {"session_id": sids[0], "message": "hi"})["stream_id"]
            read_turn(srv.port, warm, {"tokens": 0})
            time.sleep(1.0)
            answers = ["".join(answer_tokens(tokens, n)) for n in range(turns)]
            llm.script(*[Reply(text=a, token_delay=1.0 / rate) for a in answers])
            counts = [{"tokens": 0} for _ in range(turns)]
            own0, children0 = tree_cpu_seconds(srv.proc.pid)
            streams = [
                srv.post_json("/api/chat/start", {"session_id": sid, "message": f"answer {n}"})["stream_id"]
                for n, sid in enumerate(sids)
            ]
            readers = [
                threading.Thread(target=read_turn, args=(srv.port, s, counts[n]))
                for n, s in enumerate(streams)
            ]
            for t in readers:
                t.start()
            for t in readers:
                t.join()
            own1, children1 = tree_cpu_seconds(srv.proc.pid)
            floor = _client_floor(llm.base_url, answers, rate, llm)
        finally:
            srv.stop()
            llm.stop()
    streamed = sum(c["tokens"] for c in counts)
    return {
        "tokens": streamed,
        "server_ms": (own1 - own0) * 1e6 / streamed,
        "children_ms": (children1 - children0) * 1e6 / streamed,
        "client_floor_ms": floor,
        "tokens_per_event": streamed / max(sum(c.get("events", 0) for c in counts), 1),
    }


def _client_floor(base_url: str, answers: list[str], rate: float, llm) -> float:
    """CPU ms per 1,000 tokens of the OpenAI client reading the same streams, in a process of its own."""
    from talaria_testing.fake_llm import Reply

    llm.script(*[Reply(text=a, token_delay=1.0 / rate) for a in answers])
    done = subprocess.run(
        [sys.executable, __file__, "--floor-client", base_url, "--turns", str(len(answers))],
        capture_output=True,
        text=True,
        check=True,
    )
    return float(done.stdout.strip().splitlines()[-1])


def floor_client(base_url: str, turns: int) -> float:
    """Reads ``turns`` streamed completions at once with the OpenAI client; CPU ms per 1,000 chunks."""
    import openai

    client = openai.OpenAI(base_url=base_url, api_key="sk-test-1234")
    counts = [0] * turns

    def read(n: int) -> None:
        stream = client.chat.completions.create(
            model="fake-model", messages=[{"role": "user", "content": f"answer {n}"}], stream=True
        )
        for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                counts[n] += 1

    threads = [threading.Thread(target=read, args=(n,)) for n in range(turns)]
    started = time.process_time()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return (time.process_time() - started) * 1e6 / max(sum(counts), 1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--turns", type=int, default=8)
    parser.add_argument("--tokens", type=int, default=1000, help="tokens per answer")
    parser.add_argument("--rate", type=float, default=100.0, help="tokens per second per answer")
    parser.add_argument("--pipeline-only", action="store_true")
    parser.add_argument("--floor-client", metavar="BASE_URL", help=argparse.SUPPRESS)
    opts = parser.parse_args(argv)
    if opts.floor_client:
        print(f"{floor_client(opts.floor_client, opts.turns):.1f}")
        return 0
    from api.store import config

    with tempfile.TemporaryDirectory(prefix="talaria-bench-pipeline-") as home:
        config.configure(config.load_settings(environ={"HERMES_HOME": home, "HERMES_WEBUI_STATE_DIR": home}))
        piped = [pipeline_run(opts.turns, opts.tokens, opts.rate) for _ in range(opts.runs)]
    print(
        f"pipeline, {opts.turns} answers of {opts.tokens} tokens at {opts.rate:g} tokens/s, CPU ms per 1,000 "
        f"tokens, median of {opts.runs}: render + journal + relay {statistics.median(p[0] for p in piped):.1f}"
        f" (runs {', '.join(f'{p[0]:.1f}' for p in piped)}), floor {statistics.median(p[1] for p in piped):.1f}",
        flush=True,
    )
    if opts.pipeline_only:
        return 0
    runs = []
    for n in range(opts.runs):
        runs.append(server_run(opts.turns, opts.tokens, opts.rate))
        print(f"server run {n + 1}: " + ", ".join(f"{k} {v:.1f}" for k, v in runs[-1].items()), flush=True)
    print(f"server, {opts.turns} turns at once, CPU ms per 1,000 tokens, median of {opts.runs}:")
    for key in ("server_ms", "children_ms", "client_floor_ms", "tokens_per_event"):
        print(f"  {key:16} {statistics.median(r[key] for r in runs):8.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

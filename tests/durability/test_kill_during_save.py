"""A real process saving a growing session is SIGKILLed at random moments; nothing acknowledged is lost."""

from __future__ import annotations

import multiprocessing
import os
import random
import select
import signal
import time

import pytest

from api.models import Session
from api.session_recovery import recover_all_sessions_on_startup
from talaria_testing.crash_child import grow_session_forever

KILLS = 200


def _expected(n):
    return {"role": "user" if n % 2 == 0 else "assistant", "content": f"message {n} " + "x" * (n % 97), "timestamp": 1000.0 + n}


@pytest.fixture(scope="module")
def ctx():
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["api.models", "talaria_testing.crash_child"])
    return context


def _run_and_kill(ctx, session_dir, sid, rng):
    read_fd, write_fd = os.pipe()
    proc = ctx.Process(target=grow_session_forever, args=(str(session_dir), sid, write_fd))
    proc.start()
    os.close(write_fd)
    wanted = rng.randint(1, 4)
    acked, buf = 0, b""
    deadline = time.monotonic() + 20
    while wanted > 0 and time.monotonic() < deadline:
        ready, _, _ = select.select([read_fd], [], [], 1.0)
        if ready:
            chunk = os.read(read_fd, 4096)
            buf += chunk
            wanted -= chunk.count(b"\n")
    time.sleep(rng.random() * 0.004)
    os.kill(proc.pid, signal.SIGKILL)
    proc.join()
    while True:
        chunk = os.read(read_fd, 4096)
        if not chunk:
            break
        buf += chunk
    os.close(read_fd)
    lines = [int(x) for x in buf.split(b"\n") if x.strip()]
    if lines:
        acked = lines[-1]
    return acked


def test_sigkill_mid_save_never_tears_the_file_or_loses_acknowledged_messages(ctx, state_dir):
    rng = random.Random(1234)
    sid = "crashgrow"
    acked_max = 0
    violations = []
    for kill in range(KILLS):
        acked = _run_and_kill(ctx, state_dir, sid, rng)
        acked_max = max(acked_max, acked)
        loaded = Session.load(sid)  # a torn file would raise here
        count = len(loaded.messages) if loaded else 0
        if count < acked_max:
            violations.append((kill, "lost acknowledged messages", count, acked_max))
        if loaded and loaded.messages != [_expected(i) for i in range(count)]:
            violations.append((kill, "content differs", count))
        acked_max = max(acked_max, count)
    assert not violations, violations[:5]
    summary = recover_all_sessions_on_startup(state_dir)
    assert summary["restored"] == 0
    assert len(Session.load(sid).messages) >= acked_max
    leftovers = [p.name for p in state_dir.iterdir() if ".tmp." in p.name]
    assert len(leftovers) <= KILLS  # a kill between create and replace may leave a temp file, never a torn session

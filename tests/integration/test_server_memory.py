"""The server's memory stays flat over 1,000 turns: the real server, the real agent in its worker processes
(recycled after ``worker_max_turns``), the fake LLM answering at once, turns sent through ``/api/chat/start``
and read to their end through ``/api/chat/stream``.

What is measured is the server's Python heap (``talaria_testing.heap_probe``): tracing starts after a warm-up,
so what the imports and the first turns built is left out; the bounded caches then turn over once (each
finished journal kept, each session row, each session of the cache); from there on the heap held after a garbage
collection is measured twice, and the growth between the two must stay below half of what a leak of
``LEAK_BYTES`` per turn would add. The sessions stay short (a lane of turns moves to a fresh session every
``TURNS_PER_SESSION`` turns) so that what a session holds does not grow with the test: the growth left is
what the server keeps per turn.

History: the turn journal kept every finished turn's journal for ten minutes, with its runner (whose request to
the worker holds the session's model context) and its ``done`` event (a page of the session). A server that
ran 1,000 turns within ten minutes held all 1,000 of them; its RSS grew by 22–40 MB. Now the newest
``turn_journal.FINISHED_KEPT`` finished journals are kept, and a finished turn lets go of its runner. The
texts known to carry no tag (``message_keys.KnownTexts``) were kept up to 200,000 of them whatever their
length (each turn added its own), and the sidebar index kept each session's row in orjson's 32 KB buffer; both
are bounded by what they hold now. With these, the growth measured here is about 1.4 KB a turn: bounded
caches still filling (rendered Markdown, the search indexer's timings) and each new session's sidebar row.
"""

from __future__ import annotations

import time

import pytest

from talaria_testing.many_turns import Lanes, WorkerWatch, answer, memory_server

pytestmark = pytest.mark.integration

LANES = 5  # turns sent at once, each lane in its own session
TURNS_PER_SESSION = 25
WARM_UP = 120  # turns before tracing starts
TURN_OVER = 240  # turns after the mark before the first measure: the bounded caches are replaced once
MEASURED = 640  # turns between the two measures
LEAK_BYTES = 8 * 1024  # a leak of this much per turn fails the test
WORKER_MAX_TURNS = 250


def test_the_servers_heap_stays_flat_over_1000_turns_and_the_workers_are_recycled(llm, fake, tmp_path):
    fake.default_reply = answer
    srv = memory_server(tmp_path, llm.base_url, lanes=LANES, worker_max_turns=WORKER_MAX_TURNS)
    started = time.monotonic()
    with srv, WorkerWatch(srv) as workers:
        turns = Lanes(srv, LANES, TURNS_PER_SESSION)
        turns.run(WARM_UP)
        srv.mark()
        turns.run(TURN_OVER)
        first = srv.measure()
        turns.run(MEASURED)
        last = srv.measure()
    grown = last["traced"] - first["traced"]
    bound = MEASURED * LEAK_BYTES // 2
    report = (
        f"{turns.sent} turns in {time.monotonic() - started:.0f} s; the heap grew by {grown} bytes "
        f"({grown / MEASURED:.0f} per turn, {last['blocks'] - first['blocks']} blocks) over {MEASURED} turns, "
        f"bound {bound}; {len(workers.peak_kb)} workers, peak RSS (KB) {list(workers.peak_kb.values())}; "
        "grown most:\n" + "\n".join(last["grown"])
    )
    print(report)
    assert grown < bound, report
    # Each worker ran at most WORKER_MAX_TURNS turns before a fresh one took its place, so none grew with the
    # test: the largest a worker became is about what the first ones became.
    assert len(workers.peak_kb) >= turns.sent // WORKER_MAX_TURNS, workers.peak_kb
    first_peak = max(list(workers.peak_kb.values())[:2])
    assert max(workers.peak_kb.values()) < first_peak * 1.5, workers.peak_kb

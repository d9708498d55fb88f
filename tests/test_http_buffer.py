"""The response buffer a request worker writes to: memory for small answers, a spool file for large ones,
one budget across all clients, refusal only of what a retry cannot repeat."""

from __future__ import annotations

import socket
import threading

from api.http_buffer import MEMORY_PER_RESPONSE, ResponseBudget, ResponseBuffer

MB = 1 << 20


def _send_whole(buffer: ResponseBuffer) -> bytes:
    """Everything ``buffer`` sends, through a real socket pair drained by a reader thread."""
    ours, theirs = socket.socketpair()
    received: list[bytes] = []

    def read() -> None:
        while chunk := theirs.recv(1 << 16):
            received.append(chunk)

    reader = threading.Thread(target=read)
    reader.start()
    try:
        while not buffer.done:
            buffer.send_some(ours)
    finally:
        ours.close()
        reader.join(10)
        theirs.close()
    return b"".join(received)


def test_a_small_response_is_held_in_memory_and_given_back_when_closed():
    budget = ResponseBudget(memory_bytes=MB, spool_bytes=MB)
    buffer = ResponseBuffer(budget)
    buffer.write(b"HTTP/1.0 200 OK\r\n\r\n")
    buffer.write(memoryview(b"body"))
    assert (budget.memory_used, budget.spool_used) == (23, 0)
    assert _send_whole(buffer) == b"HTTP/1.0 200 OK\r\n\r\nbody"
    buffer.close()
    buffer.close()
    assert (budget.memory_used, budget.spool_used) == (0, 0)


def test_a_large_response_is_spooled_and_sent_whole():
    budget = ResponseBudget(memory_bytes=64 * MB, spool_bytes=64 * MB)
    body = bytes(range(256)) * (3 * MEMORY_PER_RESPONSE // 256)
    buffer = ResponseBuffer(budget)
    buffer.write(b"head\r\n\r\n")
    buffer.write(body)
    assert budget.memory_used == 0 and budget.spool_used == len(body) + 8
    assert _send_whole(buffer) == b"head\r\n\r\n" + body
    buffer.close()
    assert (budget.memory_used, budget.spool_used) == (0, 0)


def test_a_response_past_the_budget_is_refused_and_holds_nothing():
    budget = ResponseBudget(memory_bytes=MB, spool_bytes=2 * MB)
    holder = ResponseBuffer(budget)
    holder.write(b"x" * (MB + MB // 2))
    refused = ResponseBuffer(budget)
    refused.write(b"head\r\n\r\n")
    refused.write(b"y" * MB)
    refused.write(b"more")
    assert refused.refused and refused.size == 0
    assert budget.spool_used == MB + MB // 2
    holder.close()
    refused.close()
    assert (budget.memory_used, budget.spool_used) == (0, 0)


def test_the_answer_to_a_state_change_is_kept_past_the_budget():
    budget = ResponseBudget(memory_bytes=0, spool_bytes=0)
    buffer = ResponseBuffer(budget, refusable=False)
    buffer.write(b"head\r\n\r\n")
    buffer.write(b"z" * (2 * MB))
    assert not buffer.refused
    assert _send_whole(buffer) == b"head\r\n\r\n" + b"z" * (2 * MB)
    buffer.close()
    assert (budget.memory_used, budget.spool_used) == (0, 0)

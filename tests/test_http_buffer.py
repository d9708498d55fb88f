"""The response buffer a request worker writes to: memory for small answers, a spool file for large ones,
one budget across all clients, refusal only of what a retry cannot repeat; a body the real writer sends
while it is still written, whole or cut."""

from __future__ import annotations

import contextlib
import socket
import threading
import time

import pytest

from api.server.http_buffer import MEMORY_PER_RESPONSE, ResponseBudget, ResponseBuffer
from api.server.http_writer import ResponseWriter

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


# ---------------------------------------------------------------------- a body sent while it is written


@contextlib.contextmanager
def _sending_early(budget: ResponseBudget):
    """A buffer the real writer sends while it is written, over TCP on 127.0.0.1, its head written and
    sending begun: (buffer, client)."""
    writer = ResponseWriter(idle_timeout=5, total_timeout=20)
    listener = socket.create_server(("127.0.0.1", 0))
    client = socket.create_connection(listener.getsockname())
    server_side, _ = listener.accept()
    listener.close()
    server_side.setblocking(False)
    client.settimeout(5)
    buffer = ResponseBuffer(budget)
    buffer.start_sending = lambda: writer.deliver(server_side, buffer)
    buffer.write(b"head\r\n\r\n")
    buffer.send_while_written()
    try:
        yield buffer, client
        assert writer.wait_idle(10)
    finally:
        client.close()
        writer.close()


def _receive(client: socket.socket, count: int) -> bytes:
    chunks = []
    while count > 0:
        chunk = client.recv(min(count, 1 << 16))
        assert chunk, "the connection ended early"
        chunks.append(chunk)
        count -= len(chunk)
    return b"".join(chunks)


def test_a_body_sent_while_written_reaches_the_client_before_it_is_whole_and_ends_cleanly():
    budget = ResponseBudget(memory_bytes=MB, spool_bytes=64 * MB)
    with _sending_early(budget) as (buffer, client):
        assert _receive(client, 8) == b"head\r\n\r\n"  # the rest is not written yet
        part = bytes(range(256)) * (3 * MB // 256)
        buffer.write(part)
        assert _receive(client, len(part)) == part
        time.sleep(0.3)  # the writer waits for more, without a busy loop and without giving up
        buffer.write(b"tail")
        buffer.end_writing()
        assert _receive(client, 4) == b"tail"
        assert client.recv(1) == b""  # a clean end: the body is whole
    assert (budget.memory_used, budget.spool_used) == (0, 0)


def test_a_body_cut_while_written_resets_the_connection_so_it_never_looks_whole():
    budget = ResponseBudget(memory_bytes=MB, spool_bytes=64 * MB)
    with _sending_early(budget) as (buffer, client):
        buffer.write(b"half of it")
        assert _receive(client, 18) == b"head\r\n\r\nhalf of it"
        buffer.end_writing(whole=False)
        with pytest.raises(ConnectionResetError):
            client.recv(1)
    assert (budget.memory_used, budget.spool_used) == (0, 0)


def test_a_body_past_the_spool_budget_while_written_is_cut_and_gives_its_bytes_back():
    budget = ResponseBudget(memory_bytes=MB, spool_bytes=2 * MB)
    with _sending_early(budget) as (buffer, client):
        buffer.write(b"x" * MB)
        buffer.write(b"y" * (2 * MB))  # past the budget
        assert buffer.refused and buffer.cut
        received = b""
        with pytest.raises(ConnectionResetError):
            while chunk := client.recv(1 << 16):
                received += chunk
        assert len(received) <= 8 + MB
    assert (budget.memory_used, budget.spool_used) == (0, 0)

"""Clients of a large response that read slowly or not at all, on raw sockets (the server's slow-reader
tests): a request sent and nothing read through a small receive window, a peek at whether the answer began,
and a read until the server closes.
"""

from __future__ import annotations

import select
import socket
import time

from talaria_testing.server_proc import ServerProc


def request_without_reading(srv: ServerProc, path: str, window: int = 4096) -> socket.socket:
    """A socket that sent ``GET path`` (valid Host) and reads nothing yet, through a ``window``-byte
    receive buffer (small: the response cannot hide in the client's kernel buffers)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, window)
    sock.settimeout(10)
    sock.connect((srv.host, srv.port))
    sock.sendall(f"GET {path} HTTP/1.0\r\nHost: {srv.host}:{srv.port}\r\n\r\n".encode())
    return sock


def answer_began(sock: socket.socket) -> bool:
    """True once the first bytes of the response arrived (peeked: nothing is read)."""
    readable, _, _ = select.select([sock], [], [], 0)
    return bool(readable) and bool(sock.recv(1, socket.MSG_PEEK))


def wait_until_answers_began(socks: list[socket.socket], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not all(map(answer_began, socks)):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def read_all(sock: socket.socket, pause: float = 0.0, give_up_after: float = 60.0) -> tuple[bytes, bool]:
    """What arrives until the server closes (a reset ends it too), ``pause`` s between reads; and
    whether the server closed within ``give_up_after`` s."""
    chunks = []
    deadline = time.monotonic() + give_up_after
    try:
        while chunk := sock.recv(32768):
            chunks.append(chunk)
            if time.monotonic() > deadline:
                return b"".join(chunks), False
            if pause:
                time.sleep(pause)
    except ConnectionResetError:
        pass
    return b"".join(chunks), True

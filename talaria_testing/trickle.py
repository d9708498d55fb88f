"""An HTTP endpoint on 127.0.0.1 that answers its head at once and then one body byte at a time, slowly.

    with trickling_endpoint(interval=1.0) as base_url:   # e.g. http://127.0.0.1:PORT/v1
        ...  # GET <base_url>/models never completes within a sane time

Every connection gets ``HTTP/1.1 200`` with a large ``Content-Length`` and then a byte each ``interval``
seconds until the client goes away or the ``with`` block ends, which closes every connection and joins
every thread it started.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n"


@contextmanager
def trickling_endpoint(interval: float = 1.0) -> Iterator[str]:
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    listener.settimeout(0.1)
    stop = threading.Event()
    threads: list[threading.Thread] = []
    connections: list[socket.socket] = []
    accepted = {"count": 0}

    def trickle(conn: socket.socket) -> None:
        with conn:
            conn.settimeout(5)
            try:
                head = b""
                while b"\r\n\r\n" not in head and len(head) < 65536:
                    chunk = conn.recv(4096)
                    if not chunk:
                        return
                    head += chunk
                conn.sendall(HEAD)
                while not stop.wait(interval):
                    conn.sendall(b" ")
            except OSError:
                return

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            accepted["count"] += 1
            connections.append(conn)
            worker = threading.Thread(target=trickle, args=(conn,), daemon=True)
            threads.append(worker)
            worker.start()

    acceptor = threading.Thread(target=accept, daemon=True)
    acceptor.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/v1"
    finally:
        stop.set()
        acceptor.join(5)
        listener.close()
        for conn in connections:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        for worker in threads:
            worker.join(5)


@contextmanager
def posting_at_once(srv, path: str, body: dict, count: int = 8, timeout: float = 25.0) -> Iterator[list]:
    """``count`` clients POST ``body`` to ``path`` at once; the block runs while they wait, and on leaving
    it every answer is in the list, ``(status, json)`` or ``(0, None)`` for none within ``timeout``."""
    import json

    answers: list[tuple[int, object]] = []

    def post() -> None:
        try:
            status, _, raw = srv.request("POST", path, body, timeout=timeout)
            answers.append((status, json.loads(raw)))
        except TimeoutError:
            answers.append((0, None))

    clients = [threading.Thread(target=post) for _ in range(count)]
    for client in clients:
        client.start()
    try:
        yield answers
    finally:
        for client in clients:
            client.join(timeout + 15)

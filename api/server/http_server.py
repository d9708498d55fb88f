"""The serving loop: one selector thread reads every request whole; bounded workers answer them.

Idle and half-sent connections cost a socket and a small buffer, never a thread: the selector thread
reads the request line, header fields and body of every connection as bytes arrive, under one total
deadline per request (``request_head_timeout`` for the head, ``request_timeout`` for all of it), and
drops the oldest half-read connection when ``max_pending_connections`` are waiting. A complete request
goes to one of ``server_threads`` request workers; a Server-Sent Events stream gets a thread of its own
from a separate budget (``max_streams``), so open streams never hold the threads that answer requests.
Framing errors (``api.server.http_parse``) are answered here, as JSON, before any route sees the request.

A request worker writes its response into a buffer (``api.server.http_buffer``) and is free once the route
returns; ``api.server.http_writer`` sends it as the client reads, under ``response_idle_timeout`` and
``response_timeout``, so clients that read slowly or never hold no worker. The bytes waiting for such
clients are bounded (``response_memory_bytes``, ``response_spool_bytes``); past them a response is 503.

``api.server.app_server`` builds the server from Talaria's parts (the request handler, the route table, the
settings) and runs it.
"""

from __future__ import annotations

import errno
import logging
import queue
import resource
import selectors
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from email.utils import formatdate
from http import HTTPStatus
from typing import Any

from api.server.http_buffer import ResponseBudget, ResponseBuffer
from api.server.http_parse import (
    MAX_HEAD_BYTES,
    MAX_REQUEST_LINE,
    ProtocolError,
    RequestHead,
    head_end,
    parse_head,
)
from api.server.http_writer import ResponseFile, ResponseWriter, SocketWriter, close_after_response
from api.web import http_io

log = logging.getLogger("talaria.server")

SWEEP_INTERVAL_S = 0.25
RECV_BYTES = 256 * 1024
WRITE_TIMEOUT_S = 60.0  # an event stream's blocking writes
SPOOL_FULL = (
    "The server is busy sending large responses to slow clients (response_spool_bytes is full); retry shortly"
)
LISTEN_BACKLOG = 1024
_LISTENER = object()
_WAKER = object()


@dataclass
class _Pending:
    """A connection whose request has not fully arrived."""

    sock: socket.socket
    address: tuple[Any, ...]
    head_deadline: float
    deadline: float
    buffer: bytearray = field(default_factory=bytearray)
    head: RequestHead | None = None
    body_start: int = 0
    discard_left: int = 0  # bytes of a too-large body still to drop before answering 413
    continue_sent: bool = False


class WorkerPool:
    """``size`` daemon threads answering queued jobs; ``wait_idle`` waits until none is queued or running."""

    def __init__(self, name: str, size: int):
        self._jobs: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._outstanding = 0
        self._idle = threading.Condition()
        self._threads = [
            threading.Thread(target=self._work, name=f"{name}-{n}", daemon=True) for n in range(max(1, size))
        ]
        for thread in self._threads:
            thread.start()

    @property
    def outstanding(self) -> int:
        return self._outstanding

    def submit(self, job: Callable[[], None]) -> None:
        with self._idle:
            self._outstanding += 1
        self._jobs.put(job)

    def _work(self) -> None:
        while True:
            job = self._jobs.get()
            try:
                job()
            except Exception:  # noqa: BLE001 - a failed job never ends the worker
                log.exception("request worker failed")
            finally:
                with self._idle:
                    self._outstanding -= 1
                    if self._outstanding == 0:
                        self._idle.notify_all()

    def wait_idle(self, timeout: float) -> bool:
        with self._idle:
            return self._idle.wait_for(lambda: self._outstanding == 0, timeout)


class StreamBudget:
    """At most ``limit`` long-lived streams, each on its own daemon thread."""

    def __init__(self, limit: int):
        self.limit = max(1, limit)
        self._active = 0
        self._lock = threading.Lock()

    @property
    def active(self) -> int:
        return self._active

    def try_start(self, job: Callable[[], None]) -> bool:
        with self._lock:
            if self._active >= self.limit:
                return False
            self._active += 1
        threading.Thread(target=self._run, args=(job,), name="talaria-stream", daemon=True).start()
        return True

    def _run(self, job: Callable[[], None]) -> None:
        try:
            job()
        except Exception:  # noqa: BLE001
            log.exception("stream failed")
        finally:
            with self._lock:
                self._active -= 1


def error_response(status: int, message: str, extra_headers: tuple[tuple[str, str], ...] = ()) -> bytes:
    """A complete JSON error response written by the serving loop itself (no handler exists yet)."""
    body = http_io.dumps({"error": message})
    try:
        reason = HTTPStatus(status).phrase
    except ValueError:
        reason = "Error"
    lines = [
        f"HTTP/1.0 {status} {reason}",
        "Server: Talaria",
        f"Date: {formatdate(usegmt=True)}",
        f"Content-Type: {http_io.JSON_TYPE}",
        f"Content-Length: {len(body)}",
        "Cache-Control: no-store",
        *(f"{key}: {value}" for key, value in http_io.SECURITY_HEADERS),
        f"Content-Security-Policy: {http_io.DATA_CSP}",
        *(f"{key}: {value}" for key, value in extra_headers),
        "Connection: close",
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def _raise_fd_limit() -> int:
    """Lift the soft open-file limit to the hard one (idle sockets are cheap only if there are fds)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = hard if hard != resource.RLIM_INFINITY else 65536
    if soft != resource.RLIM_INFINITY and soft < wanted:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
            soft = wanted
        except (ValueError, OSError):
            pass
    return soft if soft != resource.RLIM_INFINITY else 65536


class TalariaServer:
    def __init__(
        self,
        host: str,
        port: int,
        *,
        handler_factory: Callable[
            [socket.socket, tuple[Any, ...], TalariaServer, bytes, float, ResponseFile], None
        ],
        is_stream: Callable[[str, str], bool],
        threads: int,
        max_streams: int,
        max_pending: int,
        head_timeout: float,
        request_timeout: float,
        max_body_bytes: int,
        response_memory_bytes: int,
        response_spool_bytes: int,
        response_idle_timeout: float,
        response_timeout: float,
    ):
        self.app: object = None  # what the handlers serve (``api.server.app.App``), opaque to the loop
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._listener = socket.socket(family, socket.SOCK_STREAM)
        try:
            self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self._listener.bind((host, port))
            self._listener.listen(LISTEN_BACKLOG)
            self._listener.setblocking(False)
        except OSError:
            self._listener.close()
            raise
        self.server_address = self._listener.getsockname()
        fd_limit = _raise_fd_limit()
        self._handler_factory = handler_factory
        self._is_stream = is_stream
        self._max_pending = max(8, min(max_pending, fd_limit // 2))
        self._max_queue = max(64, 8 * threads)
        self._head_timeout = head_timeout
        self._request_timeout = request_timeout
        self._max_body = max_body_bytes
        self._pending: dict[int, _Pending] = {}  # insertion order = arrival order
        self._selector = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._selector.register(self._listener, selectors.EVENT_READ, _LISTENER)
        self._selector.register(self._wake_r, selectors.EVENT_READ, _WAKER)
        self._stopping = threading.Event()
        self._stopped = threading.Event()
        self._stopped.set()
        self.requests = WorkerPool("talaria-request", threads)
        self.streams = StreamBudget(max_streams)
        self.response_budget = ResponseBudget(response_memory_bytes, response_spool_bytes)
        self.responses = ResponseWriter(response_idle_timeout, response_timeout)

    # ------------------------------------------------------------------ lifecycle

    @property
    def stopping(self) -> bool:
        return self._stopping.is_set()

    def serve_forever(self) -> None:
        self._stopped.clear()
        next_sweep = time.monotonic() + SWEEP_INTERVAL_S
        try:
            while not self._stopping.is_set():
                for key, _mask in self._selector.select(SWEEP_INTERVAL_S):
                    if key.data is _LISTENER:
                        self._accept()
                    elif key.data is _WAKER:
                        self._drain_waker()
                    else:
                        self._read(key.data)
                now = time.monotonic()
                if now >= next_sweep:
                    self._expire(now)
                    next_sweep = now + SWEEP_INTERVAL_S
        finally:
            for pending in list(self._pending.values()):
                self._drop(pending)
            self._stopped.set()

    def shutdown(self) -> None:
        """Stop the loop (from another thread) and wait until it returned."""
        self._stopping.set()
        try:
            self._wake_w.send(b"x")
        except OSError:
            pass
        self._stopped.wait()

    def wait_idle(self, timeout: float) -> bool:
        """Wait until no request is queued or running and every response is sent; False on timeout
        (streams are not waited for)."""
        deadline = time.monotonic() + timeout
        return self.requests.wait_idle(timeout) and self.responses.wait_idle(
            max(0.0, deadline - time.monotonic())
        )

    def server_close(self) -> None:
        self.responses.close()
        for sock in (self._listener, self._wake_r, self._wake_w):
            try:
                self._selector.unregister(sock)
            except (KeyError, ValueError):
                pass
            sock.close()
        self._selector.close()

    # ------------------------------------------------------------------ the selector thread

    def _drain_waker(self) -> None:
        try:
            while self._wake_r.recv(4096):
                pass
        except OSError:
            pass

    def _accept(self) -> None:
        while True:
            try:
                sock, address = self._listener.accept()
            except BlockingIOError:
                return
            except OSError as exc:
                if exc.errno in (errno.EMFILE, errno.ENFILE) and self._pending:
                    self._drop(next(iter(self._pending.values())))
                    continue
                log.warning("accept failed: %s", exc)
                return
            if len(self._pending) >= self._max_pending:
                self._drop(next(iter(self._pending.values())))  # the oldest half-read request
            sock.setblocking(False)
            now = time.monotonic()
            pending = _Pending(sock, address, now + self._head_timeout, now + self._request_timeout)
            self._pending[sock.fileno()] = pending
            self._selector.register(sock, selectors.EVENT_READ, pending)

    def _read(self, pending: _Pending) -> None:
        try:
            data = pending.sock.recv(RECV_BYTES)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._drop(pending)
            return
        if not data:
            self._drop(pending)
            return
        try:
            if pending.discard_left:
                pending.discard_left = max(0, pending.discard_left - len(data))
                if not pending.discard_left:
                    self._reject(pending, 413, f"Request body too large (limit {self._max_body} bytes)")
                return
            pending.buffer += data
            if pending.head is None and not self._parse_head(pending):
                return
            assert pending.head is not None  # _parse_head set it
            if len(pending.buffer) - pending.body_start >= pending.head.content_length:
                self._dispatch(pending)
        except ProtocolError as exc:
            self._reject(pending, exc.status, exc.message)

    def _parse_head(self, pending: _Pending) -> bool:
        """True once the head is parsed and the body (if any) is expected."""
        end = head_end(pending.buffer)
        if end < 0:
            if len(pending.buffer) > MAX_HEAD_BYTES:
                raise ProtocolError(431, "Request header fields too large")
            if (
                b"\r\n" not in pending.buffer[: MAX_REQUEST_LINE + 2]
                and len(pending.buffer) > MAX_REQUEST_LINE
            ):
                raise ProtocolError(414, "Request line too long")
            return False
        head = parse_head(bytes(pending.buffer[:end]))
        pending.head, pending.body_start = head, end
        received = len(pending.buffer) - end
        if head.content_length > self._max_body:
            if head.content_length - received > http_io.DRAIN_MAX_BYTES:
                raise ProtocolError(413, f"Request body too large (limit {self._max_body} bytes)")
            # Drop the body before answering, so the client reads the 413 rather than a reset.
            pending.discard_left = head.content_length - received
            del pending.buffer[:]
            if head.expect_continue:
                raise ProtocolError(413, f"Request body too large (limit {self._max_body} bytes)")
            if not pending.discard_left:
                raise ProtocolError(413, f"Request body too large (limit {self._max_body} bytes)")
            return False
        if head.expect_continue and received < head.content_length and not pending.continue_sent:
            pending.continue_sent = True
            self._send_quietly(pending.sock, b"HTTP/1.1 100 Continue\r\n\r\n")
        return True

    def _expire(self, now: float) -> None:
        for pending in list(self._pending.values()):
            if now >= pending.deadline or (pending.head is None and now >= pending.head_deadline):
                if pending.buffer or pending.head is not None:
                    self._reject(pending, 408, "Request not received in time")
                else:
                    self._drop(pending)

    def _forget(self, pending: _Pending) -> None:
        self._pending.pop(pending.sock.fileno(), None)
        try:
            self._selector.unregister(pending.sock)
        except (KeyError, ValueError):
            pass

    def _drop(self, pending: _Pending) -> None:
        self._forget(pending)
        pending.sock.close()

    def _send_quietly(self, sock: socket.socket, data: bytes) -> None:
        try:
            sock.send(data)
        except OSError:
            pass

    def _reject(self, pending: _Pending, status: int, message: str) -> None:
        extra: tuple[tuple[str, str], ...] = ()
        if status == 501:
            extra = (("Allow", "GET, HEAD, POST"),)
        self._forget(pending)
        self.responses.deliver(pending.sock, ResponseBuffer.holding(error_response(status, message, extra)))

    def _dispatch(self, pending: _Pending) -> None:
        head = pending.head
        assert head is not None  # only a request whose head was read is dispatched
        raw = bytes(pending.buffer[: pending.body_start + head.content_length])
        self._forget(pending)
        sock = pending.sock
        path = head.target.split("?", 1)[0]
        received_at = time.perf_counter()

        def stream() -> None:
            sock.setblocking(True)
            sock.settimeout(WRITE_TIMEOUT_S)
            try:
                self._handler_factory(sock, pending.address, self, raw, received_at, SocketWriter(sock))
            finally:
                close_after_response(sock)

        def answer() -> None:
            response = ResponseBuffer(self.response_budget, refusable=head.method in ("GET", "HEAD"))
            response.start_sending = lambda: self.responses.deliver(sock, response)
            try:
                self._handler_factory(sock, pending.address, self, raw, received_at, response)
            finally:
                if response.sending_early:
                    response.end_writing()  # already with the writer; whole unless the handler cut it
                else:
                    if response.refused:
                        response = ResponseBuffer.holding(
                            error_response(503, SPOOL_FULL, (("Retry-After", "5"),))
                        )
                    self.responses.deliver(sock, response)

        if self._stopping.is_set():
            self._refuse(sock, "The server is shutting down")
        elif self._is_stream(head.method, path):
            if not self.streams.try_start(stream):
                self._refuse(sock, "Too many open streams; close a tab and retry")
        elif self.requests.outstanding >= self._max_queue:
            self._refuse(sock, "The server is busy; retry shortly")
        else:
            self.requests.submit(answer)

    def _refuse(self, sock: socket.socket, message: str) -> None:
        response = error_response(503, message, (("Retry-After", "1"),))
        self.responses.deliver(sock, ResponseBuffer.holding(response))

"""Sending finished responses without holding a thread per client.

A request worker hands its buffered response (``api.server.http_buffer``) to ``ResponseWriter.deliver`` and is
free at once. The response goes out right there while the socket takes it (most do, whole, in one call);
what is left, one writer thread sends as each socket drains, waiting on all of them with a selector. A
client that takes no byte for ``idle_timeout`` s, or has not taken its whole response ``total_timeout`` s
after it was handed over, is cut off with a reset (so the kernel drops what it still held for it), and the
response's bytes go back to the budget. A response still being written (``ResponseBuffer.send_while_written``)
that has sent all it holds waits outside the selector until its handler writes more; the total deadline
still runs for it, the idle one only once it has bytes again. A client counts as taking bytes when the kernel
sees them acknowledged, not only when the socket has room again. After a whole response the connection is closed, as every
response of this server closes its connection.

``SocketWriter`` is the other ``wfile``: event streams, which hold a thread of their own, write straight
to their blocking socket.
"""

from __future__ import annotations

import array
import fcntl
import logging
import selectors
import socket
import struct
import termios
import threading
import time
from dataclasses import dataclass

from api.server.http_buffer import ResponseBuffer

log = logging.getLogger("talaria.server")

TICK_S = 0.25  # how often deadlines are checked while no socket drains
_WAKER = object()
_RESET_ON_CLOSE = struct.pack("ii", 1, 0)  # SO_LINGER on, 0 s: close() sends a reset


class SocketWriter:
    """``wfile`` of an event stream: every write goes out whole (``sendall``), nothing waits in a buffer."""

    def __init__(self, sock: socket.socket):
        self._sock = sock

    def write(self, data: bytes) -> int:
        self._sock.sendall(data)
        return len(data)

    def flush(self) -> None:
        pass


ResponseFile = ResponseBuffer | SocketWriter  # a handler's wfile: buffered (requests) or direct (streams)


@dataclass(eq=False)  # one per response: compared and hashed by identity
class _Outgoing:
    sock: socket.socket
    buffer: ResponseBuffer
    idle_deadline: float
    deadline: float
    taken: int = 0  # bytes the client has taken (acknowledged) at the last look
    finished: bool = False


def bytes_taken(sock: socket.socket, sent: int) -> int:
    """Of the ``sent`` bytes handed to the kernel, how many the client has acknowledged: a slow reader
    drains a full send buffer long before the socket counts as writable again, and that is progress."""
    unsent = array.array("i", [0])
    try:
        fcntl.ioctl(sock.fileno(), termios.TIOCOUTQ, unsent)
    except OSError:
        return sent
    return sent - unsent[0]


def close_after_response(sock: socket.socket) -> None:
    """End a connection whose response is complete: FIN after the last byte, then close."""
    try:
        sock.shutdown(socket.SHUT_WR)
    except OSError:
        pass
    sock.close()


def cut_off(sock: socket.socket) -> None:
    """End a connection at once: a reset, and nothing left queued for the client."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _RESET_ON_CLOSE)
    except OSError:
        pass
    sock.close()


class ResponseWriter:
    """Sends handed-over responses on non-blocking sockets under an idle and a total deadline."""

    def __init__(self, idle_timeout: float, total_timeout: float):
        self.idle_timeout = idle_timeout
        self.total_timeout = total_timeout
        self._selector = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._selector.register(self._wake_r, selectors.EVENT_READ, _WAKER)
        self._lock = threading.Condition()
        self._incoming: list[_Outgoing] = []
        self._outstanding = 0  # handed over and not yet finished (incoming, in the selector or parked)
        self._parked: set[_Outgoing] = set()  # waiting for their handler to write more
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="talaria-writer", daemon=True)
        self._thread.start()

    @property
    def outstanding(self) -> int:
        return self._outstanding

    def deliver(self, sock: socket.socket, buffer: ResponseBuffer) -> None:
        """Send ``buffer`` on the non-blocking ``sock``, then close both; returns without waiting for the
        client (what the socket does not take now, the writer thread sends later)."""
        try:
            while not buffer.done and buffer.send_some(sock):
                pass
        except (BlockingIOError, InterruptedError):
            pass
        except OSError:
            buffer.close()
            cut_off(sock)
            return
        if buffer.done:
            buffer.close()
            if buffer.cut:
                cut_off(sock)
            else:
                close_after_response(sock)
            return
        now = time.monotonic()
        with self._lock:
            if self._stopping:
                buffer.close()
                cut_off(sock)
                return
            self._outstanding += 1
            self._incoming.append(_Outgoing(sock, buffer, now + self.idle_timeout, now + self.total_timeout))
        self._wake()

    def wait_idle(self, timeout: float) -> bool:
        """Wait until every handed-over response is sent or cut off; False on timeout."""
        with self._lock:
            return self._lock.wait_for(lambda: self._outstanding == 0, timeout)

    def close(self) -> None:
        """Stop the writer thread; connections still receiving are cut off."""
        with self._lock:
            self._stopping = True
        self._wake()
        self._thread.join()
        self._selector.close()
        self._wake_r.close()
        self._wake_w.close()

    # ------------------------------------------------------------------ the writer thread

    def _wake(self) -> None:
        try:
            self._wake_w.send(b"x")
        except OSError:
            pass  # a wake-up is already pending

    def _run(self) -> None:
        next_expiry = time.monotonic() + TICK_S
        try:
            while True:
                with self._lock:
                    stopping, incoming, self._incoming = self._stopping, self._incoming, []
                for out in incoming:
                    try:
                        self._selector.register(out.sock, selectors.EVENT_WRITE, out)
                    except (OSError, ValueError):  # the socket is already unusable
                        self._finish(out, complete=False)
                if stopping:
                    break
                for key, _mask in self._selector.select(TICK_S):
                    if key.data is _WAKER:
                        self._drain_waker()
                    else:
                        self._pump(key.data)
                now = time.monotonic()
                if now >= next_expiry:
                    self._expire(now)
                    next_expiry = now + TICK_S
        except Exception:  # noqa: BLE001 - the writer must not die silently with sockets in its care
            log.exception("response writer failed")
            with self._lock:
                self._stopping = True  # later responses are cut off at once rather than left waiting
                stranded, self._incoming = self._incoming, []
            for out in stranded:
                self._finish(out, complete=False)
        finally:
            for key in list(self._selector.get_map().values()):
                if key.data is not _WAKER:
                    self._finish(key.data, complete=False)
            with self._lock:
                parked, self._parked = list(self._parked), set()
            for out in parked:
                self._finish(out, complete=False)

    def _drain_waker(self) -> None:
        try:
            while self._wake_r.recv(4096):
                pass
        except OSError:
            pass

    def _pump(self, out: _Outgoing) -> None:
        starved = False
        try:
            while not out.buffer.done:
                if not out.buffer.send_some(out.sock):
                    starved = True  # all there is went out; its handler still writes
                    break
        except (BlockingIOError, InterruptedError):
            pass
        except OSError:  # the client reset or closed its end
            self._finish(out, complete=False)
            return
        if out.buffer.done:
            self._finish(out, complete=not out.buffer.cut)
        elif starved:
            self._park(out)

    def _park(self, out: _Outgoing) -> None:
        """Wait outside the selector (a socket with room would wake it at once) until the handler writes."""
        self._selector.unregister(out.sock)
        with self._lock:
            self._parked.add(out)
        if not out.buffer.park(lambda: self._unpark(out)):
            self._unpark(out)  # more arrived meanwhile

    def _unpark(self, out: _Outgoing) -> None:
        with self._lock:
            if out not in self._parked:
                return
            self._parked.discard(out)
            out.idle_deadline = time.monotonic() + self.idle_timeout  # the wait was ours, not the client's
            self._incoming.append(out)
        self._wake()

    def _expire(self, now: float) -> None:
        with self._lock:
            late = [out for out in self._parked if now >= out.deadline]
            self._parked.difference_update(late)
        for out in late:
            self._finish(out, complete=False)
        for key in list(self._selector.get_map().values()):
            out = key.data
            if out is _WAKER:
                continue
            taken = bytes_taken(out.sock, out.buffer.sent)
            if taken > out.taken:
                out.taken, out.idle_deadline = taken, now + self.idle_timeout
            if now >= out.idle_deadline or now >= out.deadline:
                self._finish(out, complete=False)

    def _finish(self, out: _Outgoing, *, complete: bool) -> None:
        if out.finished:
            return
        out.finished = True
        try:
            self._selector.unregister(out.sock)
        except (KeyError, ValueError):
            pass
        out.buffer.close()
        if complete:
            close_after_response(out.sock)
        else:
            cut_off(out.sock)
        with self._lock:
            self._outstanding -= 1
            if self._outstanding == 0:
                self._lock.notify_all()

"""A finished response waiting for its client: the request worker's ``wfile``, sent out afterwards.

A route writes its whole response here and returns; ``api.server.http_writer`` then sends it as the client's
socket takes it. Small responses stay in memory; one larger than ``MEMORY_PER_RESPONSE`` (or any, once the
memory budget is spent) is spooled to an anonymous temporary file and sent from there with ``sendfile``.
One ``ResponseBudget`` bounds the bytes held across every client still receiving, in memory and spooled:
a response that would pass it is refused whole (its writes are dropped, and the serving loop answers 503
instead), so clients that read slowly or never cost bounded memory and disk, never a request worker. Only
the answer to a request that changes nothing can be refused: a POST has done its work by the time it
answers, and a 503 would invite a second one, so its answer (small: a row, a session) is held in memory,
counted whatever the budget.

A body made as it is sent (a folder's zip) is sent while it is written: ``send_while_written`` moves the
buffer to its spool file and hands it to the writer at once (``start_sending``, set by the serving loop);
each later write lands in the file and wakes the writer if it waits for more; ``end_writing`` says the body
is whole, or cut (then the client's connection is reset, so a cut body never looks whole).
"""

from __future__ import annotations

import os
import socket
import tempfile
import threading
from collections.abc import Callable
from typing import IO

MEMORY_PER_RESPONSE = 1 << 20  # larger responses go to a spool file, not the memory budget
SEND_BYTES = 1 << 20  # most bytes one send call offers the socket
MAX_IOVECS = 512  # most chunks one sendmsg call takes (the kernel refuses more than 1024)


class ResponseBudget:
    """Bytes of unsent responses held in memory and in spool files, across all clients, each bounded."""

    def __init__(self, memory_bytes: int, spool_bytes: int):
        self.memory_limit = max(0, memory_bytes)
        self.spool_limit = max(0, spool_bytes)
        self.memory_used = 0
        self.spool_used = 0
        self._lock = threading.Lock()

    def take_memory(self, count: int, force: bool = False) -> bool:
        with self._lock:
            if self.memory_used + count > self.memory_limit and not force:
                return False
            self.memory_used += count
            return True

    def take_spool(self, count: int, force: bool = False) -> bool:
        with self._lock:
            if self.spool_used + count > self.spool_limit and not force:
                return False
            self.spool_used += count
            return True

    def spool_room(self) -> int:
        with self._lock:
            return self.spool_limit - self.spool_used

    def give_back(self, memory: int, spool: int) -> None:
        with self._lock:
            self.memory_used -= memory
            self.spool_used -= spool


class ResponseBuffer:
    """``wfile`` for one response: ``write`` and ``flush`` as the handler uses them; ``send_some`` and
    ``close`` for the writer. Writes after a refusal are dropped; ``refused`` says so. A buffer that is
    not ``refusable`` keeps everything in memory, counted past the budget, so no spool failure can refuse it."""

    def __init__(self, budget: ResponseBudget | None, refusable: bool = True):
        self._budget = budget  # None: nothing is charged (the serving loop's own small answers)
        self._refusable = refusable
        self._chunks: list[bytes] = []
        self._memory = 0  # bytes held in _chunks, charged to the memory budget
        self._file: IO[bytes] | None = None
        self._spooled = 0  # bytes in _file, charged to the spool budget
        self._size = 0  # bytes held, in memory or spooled
        self._sent = 0
        self.refused = False
        self.closed = False
        # Sent while written: the writer takes what is flushed while the handler still writes.
        self.start_sending: Callable[[], None] | None = None  # hands the buffer to the writer now
        self.sending_early = False
        self._writing = False  # the handler still writes (only while sending early)
        self.cut = False  # the body ended before it was whole
        self._wake: Callable[[], None] | None = None  # the writer waits for more: call once there is
        self._lock = threading.Lock()  # the handler's writes against the writer's close

    @classmethod
    def holding(cls, data: bytes) -> ResponseBuffer:
        """A buffer that already holds ``data`` and charges no budget."""
        buffer = cls(None)
        buffer._chunks.append(data)
        buffer._size = len(data)
        return buffer

    # ------------------------------------------------------------------ the handler's side

    def write(self, data: bytes | bytearray | memoryview) -> int:
        with self._lock:
            count = self._write(data)
            if not self.sending_early:
                return count
            wake, self._wake = self._wake, None
        if wake is not None:
            wake()
        return count

    def _write(self, data: bytes | bytearray | memoryview) -> int:
        count = memoryview(data).nbytes
        if self.refused or self.closed or not count:
            return count
        if not self._refusable:
            self._budget_memory(count, force=True)
            self._chunks.append(bytes(data))
            self._memory += count
        elif (
            self._file is None and self._memory + count <= MEMORY_PER_RESPONSE and self._budget_memory(count)
        ):
            self._chunks.append(bytes(data))  # bytes(b) is b itself: no copy of a body already built
            self._memory += count
        elif not self._spool(data, count):
            self._refuse()
            return count
        if self._writing:
            assert self._file is not None  # sending early means spooled
            self._file.flush()  # the writer sends from the file's descriptor
        self._size += count
        return count

    def send_while_written(self, expected: int = 0) -> None:
        """Send the response while the handler still writes it (see the module's note); a response that
        cannot be refused, or a buffer no serving loop sends early, stays as it is. A body ``expected`` to
        pass the spool's room now is refused before a byte of it is sent (the serving loop answers 503)."""
        with self._lock:
            if self.start_sending is None or not self._refusable or self.refused or self.closed:
                return
            if self._budget is not None and expected > self._budget.spool_room():
                self._refuse()
                return
            if self._file is None and not self._spool(b"", 0):
                self._refuse()
                return
            assert self._file is not None
            self._file.flush()
            self._writing = self.sending_early = True
        self.start_sending()

    def end_writing(self, whole: bool = True) -> None:
        """The handler wrote its last byte (``whole``) or stopped short; the writer finishes either way."""
        with self._lock:
            if not self._writing:
                return
            self._writing = False
            self.cut = self.cut or not whole
            wake, self._wake = self._wake, None
        if wake is not None:
            wake()

    def flush(self) -> None:
        pass

    def _budget_memory(self, count: int, force: bool = False) -> bool:
        return self._budget is None or self._budget.take_memory(count, force)

    def _charge_spool(self, count: int) -> bool:
        return self._budget is None or self._budget.take_spool(count)

    def _spool(self, data: bytes | bytearray | memoryview, count: int) -> bool:
        held = self._memory if self._file is None else 0
        if not self._charge_spool(held + count):
            return False
        self._spooled += held + count
        try:
            if self._file is None:
                # Open for as long as the response is sent; close() ends it.
                self._file = tempfile.TemporaryFile(prefix="talaria-response-")  # noqa: SIM115
                for chunk in self._chunks:
                    self._file.write(chunk)
                self._release_memory()
            self._file.write(data)
        except OSError:  # the spool's disk is full or unwritable: refused like a full budget
            return False
        return True

    def _release_memory(self) -> None:
        if self._budget is not None:
            self._budget.give_back(self._memory, 0)
        self._chunks, self._memory = [], 0

    def _refuse(self) -> None:
        self.refused = True
        if self._writing:
            self.cut = True  # the writer is sending from the file: it ends the connection and closes us
            self._writing = False
        else:
            self._drop()

    # ------------------------------------------------------------------ the writer's side

    @property
    def size(self) -> int:
        return self._size

    @property
    def sent(self) -> int:
        return self._sent

    @property
    def done(self) -> bool:
        return self.cut or (not self._writing and self._sent >= self.size)

    def park(self, wake: Callable[[], None]) -> bool:
        """The writer has sent all there is of a body still being written: ``wake`` is called once more
        arrives or the body ends; False (nothing kept) when that happened already."""
        with self._lock:
            if not self._writing or self._sent < self._size or self.cut:
                return False
            self._wake = wake
            return True

    def send_some(self, sock: socket.socket) -> int:
        """Offer the socket the next bytes; how many it took (``BlockingIOError`` when none fit now; 0 when
        all there is went out and the body is still being written)."""
        if self._file is not None:
            if not self.sending_early:
                self._file.flush()  # while sending early, each write flushed itself
            count = min(SEND_BYTES, self._size - self._sent)
            if count <= 0:
                return 0
            sent = os.sendfile(sock.fileno(), self._file.fileno(), self._sent, count)
        else:
            sent = sock.sendmsg(self._unsent_chunks())
        self._sent += sent
        return sent

    def _unsent_chunks(self) -> list[memoryview]:
        views: list[memoryview] = []
        skip = self._sent
        for chunk in self._chunks:
            if skip >= len(chunk):
                skip -= len(chunk)
                continue
            views.append(memoryview(chunk)[skip:])
            skip = 0
            if len(views) == MAX_IOVECS:
                break
        return views

    def close(self) -> None:
        """Drop what is held and give its bytes back to the budget (again: nothing happens)."""
        with self._lock:
            if not self.closed:
                self.closed = True
                self._writing = False
                self._drop()

    def _drop(self) -> None:
        if self._file is not None:
            self._file.close()
        if self._budget is not None:
            self._budget.give_back(self._memory, self._spooled)
        self._chunks, self._memory, self._file, self._spooled, self._size = [], 0, None, 0, 0

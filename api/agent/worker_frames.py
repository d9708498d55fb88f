"""The pipe between the server and an agent worker process: length-prefixed orjson frames over a socket.

Each frame is a 4-byte big-endian length, then one JSON object. Either side sends from many threads (a
lock keeps frames whole) and reads from one. A closed or broken connection reads as ``None``: the other
side is gone.
"""

from __future__ import annotations

import socket
import struct
import threading
from typing import Any

import orjson

from api.rules.sanitize import scrub_surrogates

_HEADER = struct.Struct(">I")
MAX_FRAME_BYTES = 512 * 1024 * 1024  # a whole model context fits; a corrupt length does not allocate more
_DUMP_OPTIONS = orjson.OPT_NON_STR_KEYS


class FrameError(Exception):
    """The other side sent something that is not a frame."""


def encode(frame: dict[str, Any]) -> bytes:
    # The agent's result can hold values JSON does not know (a provider's objects): they travel as text.
    try:
        body = orjson.dumps(frame, default=str, option=_DUMP_OPTIONS)
    except orjson.JSONEncodeError:  # a lone surrogate from the model: U+FFFD, as the journal keeps it
        body = orjson.dumps(scrub_surrogates(frame), default=str, option=_DUMP_OPTIONS)
    return _HEADER.pack(len(body)) + body


class Channel:
    """One end of the pipe: ``send`` from any thread, ``receive`` from one."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self._reader = sock.makefile("rb")
        self._send_lock = threading.Lock()

    def send(self, frame: dict[str, Any]) -> bool:
        """Send one frame; False when the other side is gone."""
        data = encode(frame)
        try:
            with self._send_lock:
                self.sock.sendall(data)
        except OSError:
            return False
        return True

    def receive(self) -> dict[str, Any] | None:
        """The next frame, or None once the other side closed the connection."""
        try:
            head = self._reader.read(_HEADER.size)
            if len(head) < _HEADER.size:
                return None
            (size,) = _HEADER.unpack(head)
            if size > MAX_FRAME_BYTES:
                raise FrameError(f"a frame of {size} bytes is over the limit")
            body = self._reader.read(size)
        except (OSError, ValueError):
            return None
        if len(body) < size:
            return None
        frame: Any = orjson.loads(body)
        if not isinstance(frame, dict):
            raise FrameError("a frame must be a JSON object")
        return frame

    def close(self) -> None:
        """Close both ways; a thread blocked in ``receive`` wakes with None."""
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        for close in (self._reader.close, self.sock.close):
            try:
                close()
            except OSError:
                pass

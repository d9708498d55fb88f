"""Strict HTTP/1.x request heads: the request line, header fields and the body's framing.

Pure functions over bytes. The serving loop (``api.server.http_server``) calls ``parse_head`` once the blank
line has arrived, and answers a ``ProtocolError`` with its status before any route sees the request.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MAX_REQUEST_LINE = 8 * 1024
MAX_HEAD_BYTES = 64 * 1024
MAX_HEADER_FIELDS = 100
# Methods a route or the static files may answer; any other token is 501 (not implemented).
KNOWN_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"})

_TOKEN = rb"[!#$%&'*+.^_`|~0-9A-Za-z-]+"
_REQUEST_LINE = re.compile(rb"(" + _TOKEN + rb") ([\x21-\x7e]+) HTTP/(\d)\.(\d)")
_FIELD_NAME = re.compile(_TOKEN)
_DIGITS = re.compile(rb"[0-9]{1,18}")
# Field values: visible ASCII, obs-text, space and tab; never CR, LF or NUL.
_FIELD_VALUE = re.compile(rb"[\t\x20-\x7e\x80-\xff]*")


class ProtocolError(Exception):
    """A request the server refuses before routing: ``status`` and a short message for the JSON body."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True)
class RequestHead:
    method: str
    target: str
    version: tuple[int, int]
    fields: tuple[tuple[str, str], ...]  # (lower-cased name, value) in arrival order
    content_length: int
    expect_continue: bool

    def get(self, name: str) -> str | None:
        name = name.lower()
        for key, value in self.fields:
            if key == name:
                return value
        return None


def head_end(buffer: bytes | bytearray) -> int:
    """Index just past the blank line that ends the head; -1 while it has not arrived."""
    found = buffer.find(b"\r\n\r\n")
    return -1 if found < 0 else found + 4


def parse_request_line(line: bytes) -> tuple[str, str, tuple[int, int]]:
    if len(line) > MAX_REQUEST_LINE:
        raise ProtocolError(414, "Request line too long")
    match = _REQUEST_LINE.fullmatch(line)
    if match is None:
        raise ProtocolError(400, "Malformed request line")
    method, target, major, minor = match.groups()
    version = (int(major), int(minor))
    if version not in ((1, 0), (1, 1)):
        raise ProtocolError(505, "HTTP version not supported")
    if not (target.startswith(b"/") or target == b"*"):
        raise ProtocolError(400, "Request target must be a path")
    return method.decode("ascii"), target.decode("ascii"), version


def parse_fields(lines: list[bytes]) -> tuple[tuple[str, str], ...]:
    if len(lines) > MAX_HEADER_FIELDS:
        raise ProtocolError(431, "Too many header fields")
    fields = []
    for line in lines:
        name, sep, value = line.partition(b":")
        if not sep or not _FIELD_NAME.fullmatch(name):
            # Also refuses obsolete line folding (a line starting with whitespace).
            raise ProtocolError(400, "Malformed header field")
        value = value.strip(b" \t")
        if not _FIELD_VALUE.fullmatch(value):
            raise ProtocolError(400, "Malformed header field value")
        fields.append((name.decode("ascii").lower(), value.decode("latin-1")))
    return tuple(fields)


def content_length(fields: tuple[tuple[str, str], ...]) -> int:
    """The body length: one ``Content-Length`` of digits only; none means 0; chunked bodies are refused."""
    if any(name == "transfer-encoding" for name, _ in fields):
        raise ProtocolError(411, "Chunked request bodies are not supported; send Content-Length")
    values = [value for name, value in fields if name == "content-length"]
    if not values:
        return 0
    if len(values) > 1:
        raise ProtocolError(400, "More than one Content-Length")
    raw = values[0].encode("latin-1")
    if not _DIGITS.fullmatch(raw):
        raise ProtocolError(400, "Invalid Content-Length")
    return int(raw)


def parse_head(head: bytes) -> RequestHead:
    """The bytes up to and including the blank line → a ``RequestHead``, or ``ProtocolError``."""
    lines = head[: -4 if head.endswith(b"\r\n\r\n") else len(head)].split(b"\r\n")
    method, target, version = parse_request_line(lines[0])
    if method not in KNOWN_METHODS:
        raise ProtocolError(501, f"Method {method[:20]} not implemented")
    fields = parse_fields(lines[1:])
    hosts = [value for name, value in fields if name == "host"]
    if len(hosts) > 1:
        raise ProtocolError(400, "More than one Host header")
    if version == (1, 1) and not hosts:
        raise ProtocolError(400, "Missing Host header")
    expect = next((value for name, value in fields if name == "expect"), None)
    if expect is not None and expect.lower() != "100-continue":
        raise ProtocolError(417, "Unsupported Expect header")
    return RequestHead(
        method=method,
        target=target,
        version=version,
        fields=fields,
        content_length=content_length(fields),
        expect_continue=expect is not None,
    )

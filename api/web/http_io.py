"""HTTP plumbing: request parsing, JSON responses, security headers, the one error shape.

A ``handler`` is anything ``BaseHTTPRequestHandler``-shaped: ``send_response``, ``send_header``,
``end_headers``, ``wfile``; ``headers``, ``rfile`` and ``command`` are optional (tests pass fakes).
"""

from __future__ import annotations

import errno
import json
import logging
import select
import socket
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler
from io import BufferedIOBase
from typing import Any
from urllib.parse import parse_qs, urlsplit

import orjson

from api.rules.errors import (  # noqa: F401 - re-exported: routes and tests import them from here
    ApiError,
    BadRequest,
    Conflict,
    Forbidden,
    NotFound,
    PayloadTooLarge,
    ServiceUnavailable,
    TooManyRequests,
    Unauthorized,
    UnsupportedMediaType,
    redact_paths,
)
from api.rules.sanitize import scrub_surrogates
from api.rules.session_fields import is_safe_session_id
from api.store import config as _config

log = logging.getLogger("talaria.http")

JSON_TYPE = "application/json; charset=utf-8"
SECURITY_HEADERS: tuple[tuple[str, str], ...] = (
    ("X-Content-Type-Options", "nosniff"),
    ("Referrer-Policy", "no-referrer"),
    ("X-Frame-Options", "DENY"),
)
# The page is same-origin modules and stylesheets only; message HTML is sanitized server-side, and this
# policy makes any markup that slipped through inert (no inline script, no foreign fetches, no framing).
HTML_CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; font-src 'self'; "
    "connect-src 'self'; worker-src 'self'; manifest-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)


def page_csp() -> str:
    """The page's policy; the remote_images setting lets https images load."""
    if _config.setting("remote_images"):
        return HTML_CSP.replace("img-src 'self' data:;", "img-src 'self' data: https:;")
    return HTML_CSP


# The service worker fetches the page's own files and nothing else; it runs no markup.
WORKER_CSP = "default-src 'none'; connect-src 'self'; frame-ancestors 'none'"

# Non-HTML answers (JSON, downloads) are never meant to render anything.
DATA_CSP = "default-src 'none'; frame-ancestors 'none'; sandbox"

DRAIN_MAX_BYTES = 64 * 1024 * 1024
# One nesting limit for every JSON body: far above any real request, far below what the JSON
# encoders (orjson stops at 255 levels) and Python's recursion limit can write back out.
MAX_JSON_DEPTH = 64
# Storage failures the person can act on: a clear message (never the path) and a fitting status.
_OS_ERRORS: dict[int, tuple[int, str]] = {
    errno.ENOSPC: (507, "Could not save: the disk is full (no space left on the device)."),
    errno.EDQUOT: (507, "Could not save: the disk quota is full."),
    errno.EROFS: (503, "Could not save: the state folder is on a read-only file system."),
    errno.EACCES: (500, "Could not save: permission denied on the state folder."),
    errno.EPERM: (500, "Could not save: the operation is not permitted on the state folder."),
    errno.EIO: (500, "Could not save: the disk reported an I/O error."),
}


# ---------------------------------------------------------------------- responses


def dumps(payload: Any) -> bytes:
    try:
        return orjson.dumps(payload)
    except (TypeError, orjson.JSONEncodeError):
        pass
    try:
        return orjson.dumps(payload, option=orjson.OPT_NON_STR_KEYS)  # ~2x slower, so only when needed
    except (TypeError, orjson.JSONEncodeError):
        # Lone surrogates or odd types: the stdlib escapes what orjson refuses.
        return json.dumps(payload, ensure_ascii=True, default=str).encode("ascii")


def _mark_started(handler: BaseHTTPRequestHandler) -> None:
    try:
        handler._talaria_response_started = True  # type: ignore[attr-defined]
    except AttributeError:  # a handler with __slots__: nothing to remember
        pass


def response_started(handler: BaseHTTPRequestHandler) -> bool:
    return bool(getattr(handler, "_talaria_response_started", False))


def send_bytes(
    handler: BaseHTTPRequestHandler,
    body: bytes | list[bytes],
    content_type: str,
    status: int = 200,
    headers: Mapping[str, str] | list[tuple[str, str]] | None = None,
    *,
    csp: str = DATA_CSP,
    cache: str = "no-store",
) -> None:
    """Send a complete response: status, content headers, security headers, body (omitted for HEAD).

    ``body`` may be a list of chunks, written in order (a large response need not be joined first).
    """
    chunks = body if isinstance(body, list) else [body]
    _mark_started(handler)
    handler.send_response(status)
    handler.send_header("Content-Type", content_type)
    handler.send_header("Content-Length", str(sum(map(len, chunks))))
    handler.send_header("Cache-Control", cache)
    for key, value in SECURITY_HEADERS:
        handler.send_header(key, value)
    handler.send_header("Content-Security-Policy", csp)
    items = headers.items() if isinstance(headers, Mapping) else (headers or ())
    for key, value in items:
        handler.send_header(key, value)
    handler.end_headers()
    if getattr(handler, "command", None) != "HEAD":
        for chunk in chunks:
            handler.wfile.write(chunk)


class _ProducedBody:
    """The body a producer writes into: the handler's ``wfile``, stopped (``BrokenPipeError``) once the
    response was refused (the spool budget is spent) or its client is gone, so no work is done for
    nothing."""

    def __init__(self, wfile: BufferedIOBase) -> None:
        self._wfile = wfile

    def write(self, data: bytes) -> int:
        written = self._wfile.write(data)
        if getattr(self._wfile, "refused", False) or getattr(self._wfile, "closed", False) is True:
            raise BrokenPipeError(errno.EPIPE, "the response was refused or its client is gone")
        return int(written if written is not None else len(data))

    def flush(self) -> None:
        self._wfile.flush()


def send_produced(
    handler: BaseHTTPRequestHandler,
    produce: Callable[[Any], None],
    content_type: str,
    headers: Mapping[str, str] | None = None,
    expected_bytes: int = 0,
) -> None:
    """Send a response whose body ``produce(out)`` writes as it makes it (a zip of a folder): no length
    (the connection's end ends the body, as every response here closes its connection), the security
    headers, and the body sent while it is written (``ResponseBuffer.send_while_written``: spooled, so
    nothing waits on the client and a slow one holds no request worker). A body that fails midway is cut:
    the client's connection is reset, so it never looks whole. A body of about ``expected_bytes`` that the
    response spool has no room for now is not begun: the serving loop answers 503."""
    _mark_started(handler)
    handler.send_response(200)
    handler.send_header("Content-Type", content_type)
    handler.send_header("Cache-Control", "no-store")
    for key, value in SECURITY_HEADERS:
        handler.send_header(key, value)
    handler.send_header("Content-Security-Policy", DATA_CSP)
    for key, value in (headers or {}).items():
        handler.send_header(key, value)
    handler.end_headers()
    if getattr(handler, "command", None) == "HEAD":
        return
    wfile: Any = handler.wfile  # the serving loop's response spool when it has one (refused, end_writing)
    begin = getattr(wfile, "send_while_written", None)
    if begin is not None:
        begin(expected_bytes)
        if wfile.refused:
            return
    try:
        produce(_ProducedBody(wfile))
    except BaseException:
        if begin is not None:
            wfile.end_writing(whole=False)
        raise
    if begin is not None:
        wfile.end_writing()


def j(
    handler: BaseHTTPRequestHandler,
    payload: Any,
    status: int = 200,
    headers: Mapping[str, str] | list[tuple[str, str]] | None = None,
) -> None:
    """A JSON response."""
    send_bytes(handler, dumps(payload), JSON_TYPE, status, headers)


def j_bytes(handler: BaseHTTPRequestHandler, body: bytes | list[bytes], status: int = 200) -> None:
    """A JSON response whose body is already serialized."""
    send_bytes(handler, body, JSON_TYPE, status)


def bad(handler: BaseHTTPRequestHandler, msg: str, status: int = 400) -> None:
    j(handler, {"error": msg}, status)


def respond_error(handler: BaseHTTPRequestHandler, exc: BaseException) -> None:
    """The one place an exception becomes a response: ``ApiError`` → its JSON, anything else → a logged 500."""
    if isinstance(exc, (BrokenPipeError, ConnectionResetError)):
        _close(handler)
        return
    if isinstance(exc, ApiError):
        status, payload = exc.status, exc.payload()
        if status >= 500:  # the server could not serve it: the log says why, with what caused it
            log.warning(
                "%s %s answered %d: %s",
                getattr(handler, "command", "?"),
                _safe_path(handler),
                status,
                exc,
                exc_info=exc if exc.__cause__ is not None else None,
            )
    elif isinstance(exc, OSError) and exc.errno in _OS_ERRORS:
        status, message = _OS_ERRORS[exc.errno]
        log.error(
            "storage error serving %s %s: %s", getattr(handler, "command", "?"), _safe_path(handler), exc
        )
        payload = {"error": message}
    else:
        log.error(
            "unexpected error serving %s %s",
            getattr(handler, "command", "?"),
            _safe_path(handler),
            exc_info=exc,
        )
        status, payload = 500, {"error": "Internal error"}
    if response_started(handler):
        _close(handler)  # the status line is gone already: all we can do is end the connection
        return
    try:
        j(handler, payload, status)
    except OSError:
        _close(handler)


def _close(handler: BaseHTTPRequestHandler) -> None:
    try:
        handler.close_connection = True
    except AttributeError:
        pass


def _safe_path(handler: BaseHTTPRequestHandler) -> str:
    path = getattr(handler, "path", "") or ""
    return path.split("?", 1)[0][:200]


def start_stream(
    handler: BaseHTTPRequestHandler, content_type: str = "text/event-stream; charset=utf-8"
) -> None:
    """The head of a long-lived response (Server-Sent Events): no length, no caching, security headers."""
    _mark_started(handler)
    handler.send_response(200)
    handler.send_header("Content-Type", content_type)
    handler.send_header("Cache-Control", "no-store")
    handler.send_header("X-Accel-Buffering", "no")
    for key, value in SECURITY_HEADERS:
        handler.send_header(key, value)
    handler.send_header("Content-Security-Policy", DATA_CSP)
    handler.end_headers()


def client_gone(handler: BaseHTTPRequestHandler) -> bool:
    """True when the client of a long-lived response has closed its end (read side at EOF)."""
    sock = getattr(handler, "connection", None)
    if not isinstance(sock, socket.socket):
        return False
    try:
        readable, _, _ = select.select([sock], [], [], 0)
        return bool(readable) and not sock.recv(1, socket.MSG_PEEK)
    except (OSError, ValueError):
        return True


# ---------------------------------------------------------------------- requests


def split_target(target: str) -> tuple[str, dict[str, str]]:
    """``/api/x?a=1&a=2&b`` → (``/api/x``, {"a": "1", "b": ""}); the first value of a key wins."""
    parts = urlsplit(target or "/")
    query = {}
    for key, values in parse_qs(parts.query, keep_blank_values=True, errors="replace").items():
        query[key] = values[0]
    return parts.path or "/", query


def header(handler: BaseHTTPRequestHandler, name: str) -> str | None:
    headers = getattr(handler, "headers", None)
    if headers is None:
        return None
    try:
        value = headers.get(name)
    except Exception:  # noqa: BLE001 - a fake handler's odd headers object
        return None
    return value if isinstance(value, str) else None


def _is_json_type(content_type: str | None) -> bool:
    media = (content_type or "").split(";", 1)[0].strip().lower()
    return media == "application/json" or (media.startswith("application/") and media.endswith("+json"))


def deeper_than(value: Any, limit: int) -> bool:
    """True when containers nest more than ``limit`` levels (walked without recursion)."""
    stack = [(value, 1)] if isinstance(value, dict | list) else []
    while stack:
        container, depth = stack.pop()
        if depth > limit:
            return True
        children = container.values() if isinstance(container, dict) else container
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


def _with_lone_surrogates(raw: bytes) -> Any:
    """Valid JSON that orjson refuses for a lone ``\\ud800``-style escape (a browser sends one for text
    cut mid-emoji): parsed by the stdlib, each lone surrogate replaced with U+FFFD."""
    try:
        return scrub_surrogates(json.loads(raw.decode("utf-8")))
    except (ValueError, RecursionError):
        raise BadRequest("Malformed JSON body") from None


def parse_json_body(raw: bytes, content_type: str | None) -> dict[str, Any]:
    """Bytes of a POST body → a dict; empty → ``{}``; 415 unless the type is JSON (a cross-site form
    cannot send that type), 400 for malformed, non-object or too deeply nested JSON."""
    if not _is_json_type(content_type):
        raise UnsupportedMediaType("Request body must be application/json")
    if not raw.strip():
        return {}
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        if "depth" in str(exc).lower() or "recursion" in str(exc).lower():
            raise BadRequest(f"JSON nested too deeply (at most {MAX_JSON_DEPTH} levels)") from None
        if "surrogate" not in str(exc):
            raise BadRequest("Malformed JSON body") from None
        data = _with_lone_surrogates(raw)
    if not isinstance(data, dict):
        raise BadRequest("JSON body must be an object")
    if deeper_than(data, MAX_JSON_DEPTH):
        raise BadRequest(f"JSON nested too deeply (at most {MAX_JSON_DEPTH} levels)")
    return data


def content_length(raw: str | None) -> int:
    """A ``Content-Length`` value: digits only (no sign, space or exponent); absent means 0."""
    if raw is None:
        return 0
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 18:
        raise BadRequest("Invalid Content-Length")
    return int(raw)


def read_body(handler: BaseHTTPRequestHandler, max_bytes: int | None = None) -> dict[str, Any]:
    """Read and parse the request body (Content-Length framed), enforcing ``max_body_bytes``."""
    limit = int(_config.setting("max_body_bytes")) if max_bytes is None else max_bytes
    if header(handler, "Transfer-Encoding") is not None:
        _close(handler)
        raise ApiError("Chunked request bodies are not supported; send Content-Length", status=411)
    get_all = getattr(getattr(handler, "headers", None), "get_all", None)
    lengths = get_all("Content-Length") if callable(get_all) else None
    if lengths is not None and len(lengths) > 1:
        _close(handler)
        raise BadRequest("More than one Content-Length")
    try:
        length = content_length(header(handler, "Content-Length"))
    except BadRequest:
        _close(handler)
        raise
    if length > limit:
        # Read and drop a moderately large body so the client sees the 413 instead of a reset
        # connection; past DRAIN_MAX_BYTES the connection is simply closed after the answer.
        if length <= DRAIN_MAX_BYTES:
            _discard(handler.rfile, length)
        _close(handler)
        raise PayloadTooLarge(f"Request body too large (limit {limit} bytes)", limit=limit)
    raw = _read_exactly(handler.rfile, length) if length else b""
    return parse_json_body(raw, header(handler, "Content-Type"))


def _discard(rfile: BufferedIOBase, length: int) -> None:
    remaining = length
    while remaining:
        chunk = rfile.read(min(remaining, 1 << 20))
        if not chunk:
            return
        remaining -= len(chunk)


def _read_exactly(rfile: BufferedIOBase, length: int) -> bytes:
    chunks = []
    remaining = length
    while remaining:
        chunk = rfile.read(min(remaining, 1 << 20))
        if not chunk:
            raise BadRequest("Request body shorter than Content-Length")
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


# ---------------------------------------------------------------------- field checks


def require_session_id(value: Any, field: str = "session_id") -> str:
    """A safe session id, or 400 (missing, blank, a leading ``_``, or anything outside ``[A-Za-z0-9_-]{1,200}``)."""
    if not value and value != 0:  # hermes-webui's rule for a required field: falsy but not 0
        raise BadRequest(f"Missing required field(s): {field}")
    if isinstance(value, str):
        value = value.strip()
        if not value:
            raise BadRequest(f"{field} is required")
    # A leading "_" names the folder's own files (_index.json, the tombstones), never a session.
    if not is_safe_session_id(value) or value.startswith("_"):
        raise BadRequest(f"Invalid {field}")
    return value


def optional_str(body: Mapping[str, Any], name: str, max_len: int) -> str | None:
    value = body.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        raise BadRequest(f"{name} must be a string")
    if len(value) > max_len:
        raise BadRequest(f"{name} is too long (at most {max_len} characters)")
    return value


def query_int(query: Mapping[str, Any], name: str, minimum: int = 0, max_digits: int = 12) -> int | None:
    """An optional non-negative integer query parameter; 400 when present and not one."""
    raw = query.get(name)
    if raw is None or raw == "":
        return None
    raw = raw.strip()
    if not raw.isascii() or not raw.isdigit() or len(raw) > max_digits:
        raise BadRequest(f"{name} must be an integer >= {minimum}")
    value = int(raw)
    if value < minimum:
        raise BadRequest(f"{name} must be an integer >= {minimum}")
    return value

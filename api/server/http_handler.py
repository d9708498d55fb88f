"""One complete request, answered: the ``BaseHTTPRequestHandler``-shaped ``handler`` the routes receive.

The serving loop (``api.server.http_server``) reads the whole request before a worker thread sees it, so the
handler parses it from memory (``rfile`` holds the request line, header fields and body), and writes to
the ``wfile`` the loop hands it: a buffer the loop sends on afterwards, or an event stream's socket.
Requests outside ``/api`` and ``/health`` are the page's static files, each opened once through
``safe_read`` (no link, no FIFO, bounded) after its path was checked.
"""

from __future__ import annotations

import functools
import hashlib
import io
import logging
import mimetypes
import socket
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

from api.rules import origin
from api.server.http_writer import ResponseFile
from api.services import app_shell
from api.store import config, safe_read
from api.web import http_io, routes

STATIC_DIR = config.STATIC_DIR
STATIC_MAX_BYTES = 16 * 1024 * 1024  # the page's own files are far smaller

log = logging.getLogger("talaria.server")

_CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".mjs": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".json": "application/json; charset=utf-8",
    ".map": "application/json; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".ico": "image/x-icon",
    ".webp": "image/webp",
    ".woff2": "font/woff2",
    ".txt": "text/plain; charset=utf-8",
    ".webmanifest": "application/manifest+json",
}


def content_type_for(path: Path) -> str:
    return (
        _CONTENT_TYPES.get(path.suffix.lower())
        or mimetypes.guess_type(path.name)[0]
        or "application/octet-stream"
    )


def static_file(url_path: str, root: Path = STATIC_DIR) -> Path | None:
    """The file under ``root`` that ``/`` or ``/static/<rel>`` names; None for anything unsafe or missing."""
    if url_path in ("/", "/index.html"):
        rel = "index.html"
    elif url_path == app_shell.WORKER_URL:
        rel = app_shell.WORKER_FILE
    elif url_path.startswith("/static/"):
        rel = url_path[len("/static/") :]
    else:
        return None
    parts = rel.split("/")
    if (
        not rel
        or "\\" in rel
        or "\x00" in rel
        or any(p in ("", ".", "..") or p.startswith(".") for p in parts)
    ):
        return None
    root = root.resolve()
    try:
        candidate = (root / rel).resolve()
    except (OSError, RuntimeError, ValueError):
        return None
    if not candidate.is_relative_to(root) or not candidate.is_file():
        return None
    return candidate


class Handler(BaseHTTPRequestHandler):
    server_version = "Talaria"
    protocol_version = "HTTP/1.0"  # one request per connection

    def __init__(
        self,
        sock: socket.socket,
        client_address: Any,
        server: Any,
        raw: bytes,
        received_at: float,
        wfile: ResponseFile,
    ) -> None:
        # Not the base initialiser: that one reads the socket, and the serving loop has read it already.
        self.received_at = received_at  # when the whole request had arrived (perf_counter)
        self.started_at = received_at
        self.request = self.connection = sock
        self.client_address = client_address
        self.server = server
        self.rfile = io.BytesIO(raw)
        self.wfile = wfile  # type: ignore[assignment]  # it has the write and flush the base uses
        self.close_connection = True

    def run(self) -> None:
        self.started_at = time.perf_counter()
        try:
            self.handle_one_request()
        except (ConnectionError, TimeoutError):
            pass  # the client went away or stopped reading; nothing is left to tell it

    def end_headers(self) -> None:
        # The server's own time, for the benchmarks and the browser's network panel: waiting for a
        # request worker, then the route up to this response head.
        now = time.perf_counter()
        queue_ms = (self.started_at - self.received_at) * 1000
        self.send_header(
            "Server-Timing", f"queue;dur={queue_ms:.2f}, app;dur={(now - self.started_at) * 1000:.2f}"
        )
        super().end_headers()

    def handle_expect_100(self) -> bool:
        return True  # the serving loop answered "100 Continue" while it read the body

    def version_string(self) -> str:
        return self.server_version

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        log.debug("%s - %s", self.address_string(), format % args)

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """Errors the base class raises itself answer JSON too."""
        self.close_connection = True
        try:
            http_io.j(self, {"error": message or self.responses.get(code, ("Error",))[0]}, code)
        except OSError:
            pass

    def _handle(self) -> None:
        try:
            path, query = http_io.split_target(self.path)
            origin.check_request(self.command, functools.partial(http_io.header, self))
            if routes.is_api_path(path):
                routes.dispatch(self, self.command, path, query)
            elif self.command in ("GET", "HEAD"):
                self._serve_static(path)
            else:
                http_io.j(self, {"error": "Not found"}, 404)
        except Exception as exc:  # noqa: BLE001 - never a traceback on the wire
            http_io.respond_error(self, exc)

    def _serve_static(self, path: str) -> None:
        file = static_file(path)
        try:
            found = None if file is None else safe_read.read_regular_file(file, max_bytes=STATIC_MAX_BYTES)
        except (OSError, ValueError):  # a link, FIFO or folder swapped in after the check; too large
            found = None
        if file is None or found is None:
            http_io.j(self, {"error": "Not found"}, 404)
            return
        st, data = found
        etag = f'"{st.st_size:x}-{st.st_mtime_ns:x}"'
        is_html = file.suffix == ".html"
        csp = http_io.page_csp() if is_html else http_io.DATA_CSP
        if path == app_shell.WORKER_URL:
            data = app_shell.worker_source(STATIC_DIR, data)
            etag = f'"{hashlib.sha256(data).hexdigest()[:32]}"'
            csp = http_io.WORKER_CSP
        if self.headers.get("If-None-Match") == etag:
            http_io.send_bytes(
                self, b"", content_type_for(file), 304, {"ETag": etag}, csp=csp, cache="no-cache"
            )
            return
        http_io.send_bytes(self, data, content_type_for(file), 200, {"ETag": etag}, csp=csp, cache="no-cache")

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = do_HEAD = _handle

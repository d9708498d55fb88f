"""Talaria's server from its parts: the serving loop (``api.server.http_server``) answering through the request
handler and the route table, under the Host policy, sized by the settings; served until SIGTERM/SIGINT,
then stopped in order (the app's work: sidebar feeds, live turns; requests in flight; the app's sidebar index).

    server = make_server(App(), "127.0.0.1", 8787)
    serve(server)
"""

from __future__ import annotations

import logging
import signal
import socket
import threading
from types import FrameType
from typing import Any, cast

from api.rules import origin
from api.server import http_handler
from api.server.app import App
from api.server.http_server import TalariaServer
from api.server.http_writer import ResponseFile
from api.store import config
from api.web import routes

log = logging.getLogger("talaria.server")

SHUTDOWN_GRACE_S = 10.0


def _answer(
    sock: socket.socket,
    address: tuple[Any, ...],
    server: TalariaServer,
    raw: bytes,
    received_at: float,
    wfile: ResponseFile,
) -> None:
    http_handler.Handler(sock, address, server, raw, received_at, wfile).run()


def make_server(
    app: App, host: str | None = None, port: int | None = None, *, threads: int | None = None
) -> TalariaServer:
    """Bind ``host:port`` (settings by default) and build the server serving ``app``; raises ``OSError`` if it
    cannot."""
    host = config.setting("host") if host is None else host
    port = int(config.setting("port")) if port is None else port
    server = TalariaServer(
        host,
        port,
        handler_factory=_answer,
        is_stream=routes.is_stream_route,
        threads=int(config.setting("server_threads")) if threads is None else threads,
        max_streams=int(config.setting("max_streams")),
        max_pending=int(config.setting("max_pending_connections")),
        head_timeout=float(config.setting("request_head_timeout")),
        request_timeout=float(config.setting("request_timeout")),
        max_body_bytes=int(config.setting("max_body_bytes")),
        response_memory_bytes=int(config.setting("response_memory_bytes")),
        response_spool_bytes=int(config.setting("response_spool_bytes")),
        response_idle_timeout=float(config.setting("response_idle_timeout")),
        response_timeout=float(config.setting("response_timeout")),
    )
    server.app = app  # the handler hands it to the routes
    origin.configure(host, str(config.setting("allowed_hosts")))
    return server


def serve(server: TalariaServer, grace_s: float = SHUTDOWN_GRACE_S) -> None:
    """Serve until SIGTERM/SIGINT, then stop: live turns marked interrupted, requests in flight given
    ``grace_s`` to finish, the sidebar index flushed. Call from the main thread."""

    def stop(signum: int, _frame: FrameType | None) -> None:
        log.info("signal %s: shutting down", signum)
        threading.Thread(target=server.shutdown, name="shutdown", daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        server.serve_forever()
    finally:
        shutdown_sequence(server, grace_s)


def shutdown_sequence(server: TalariaServer, grace_s: float = SHUTDOWN_GRACE_S) -> None:
    """After the loop stopped: end live turns, wait for requests in flight, flush the index."""
    app = cast("App", server.app)
    app.stop_work()
    if not server.wait_idle(grace_s):
        log.warning("requests still running after %.0f s; exiting anyway", grace_s)
    server.server_close()
    app.close()

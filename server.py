"""Talaria's entry point (also the ``talaria`` console script): flags → settings → startup recovery → serve.

A bounded threaded HTTP server: at most ``server_threads`` requests run at once (the accept loop waits
for a free slot), every connection thread is a daemon, and SIGTERM/SIGINT stop accepting, mark live
turns interrupted (``api.streaming.shutdown()``), wait briefly for requests in flight, and flush the
sidebar index.
"""

from __future__ import annotations

import argparse
import logging
import mimetypes
import secrets
import signal
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

REPO_DIR = Path(__file__).resolve().parent
STATIC_DIR = REPO_DIR / "static"
SHUTDOWN_GRACE_S = 10.0

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


class TalariaServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, address, handler_cls, max_threads: int):
        self._slots = threading.BoundedSemaphore(max(1, max_threads))
        self._max_threads = max(1, max_threads)
        self._stopping = threading.Event()
        super().__init__(address, handler_cls)

    def process_request(self, request, client_address):
        # Wait for a free slot before starting a thread: the backlog queues the rest.
        while not self._slots.acquire(timeout=0.5):
            if self._stopping.is_set():
                self.shutdown_request(request)
                return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request, client_address):
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def wait_idle(self, timeout: float) -> bool:
        """Wait until no request is in flight (all slots free); False on timeout."""
        deadline = time.monotonic() + timeout
        taken = 0
        try:
            while taken < self._max_threads:
                if not self._slots.acquire(timeout=max(0.0, deadline - time.monotonic())):
                    return False
                taken += 1
            return True
        finally:
            for _ in range(taken):
                self._slots.release()


class Handler(BaseHTTPRequestHandler):
    server_version = "Talaria"
    protocol_version = "HTTP/1.0"  # one request per connection: an idle keep-alive never holds a slot
    timeout = 60

    def version_string(self) -> str:
        return self.server_version

    def log_message(self, format, *args):  # noqa: A002 - the base class's name
        log.debug("%s - %s", self.address_string(), format % args)

    def send_error(self, code, message=None, explain=None):
        """Errors the base class raises itself (bad request line, unsupported method) answer JSON too."""
        from api import http_io

        self.close_connection = True
        try:
            http_io.j(self, {"error": message or self.responses.get(code, ("Error",))[0]}, code)
        except OSError:
            pass

    def _handle(self) -> None:
        from api import http_io, routes

        try:
            path, query = http_io.split_target(self.path)
            if routes.is_api_path(path):
                routes.dispatch(self, self.command, path, query)
            elif self.command in ("GET", "HEAD"):
                self._serve_static(path)
            else:
                http_io.j(self, {"error": "Not found"}, 404)
        except Exception as exc:  # noqa: BLE001 - never a traceback on the wire
            http_io.respond_error(self, exc)

    def _serve_static(self, path: str) -> None:
        from api import http_io

        file = static_file(path)
        if file is None:
            http_io.j(self, {"error": "Not found"}, 404)
            return
        st = file.stat()
        etag = f'"{st.st_size:x}-{st.st_mtime_ns:x}"'
        is_html = file.suffix == ".html"
        csp = http_io.HTML_CSP if is_html else http_io.DATA_CSP
        if self.headers.get("If-None-Match") == etag:
            http_io.send_bytes(
                self, b"", content_type_for(file), 304, {"ETag": etag}, csp=csp, cache="no-cache"
            )
            return
        http_io.send_bytes(
            self, file.read_bytes(), content_type_for(file), 200, {"ETag": etag}, csp=csp, cache="no-cache"
        )

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = do_HEAD = _handle


# ---------------------------------------------------------------------- startup


def build_arg_parser() -> argparse.ArgumentParser:
    from api import config

    parser = argparse.ArgumentParser(
        prog="talaria",
        description="Talaria: a durable self-hosted web UI for the Hermes agent.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="settings (environment variable wins, then 'webui:' in $HERMES_HOME/config.yaml, then the default):\n"
        + config.settings_help(),
    )
    parser.add_argument(
        "--host", help="address to listen on (default 127.0.0.1; anything else needs a password)"
    )
    parser.add_argument("--port", type=int, help="TCP port (default 8787; 0 picks a free one)")
    parser.add_argument("--state-dir", help="Talaria's state folder (default $HERMES_HOME/webui)")
    parser.add_argument("--hermes-home", help="the agent's home folder (default ~/.hermes)")
    return parser


def run_startup_recovery() -> dict:
    """The startup sweep plus the interrupted-turn markers; never raises."""
    from api import config

    summary: dict = {"scanned": 0, "restored": 0, "details": [], "interrupted_turns": []}
    try:
        from api.session_recovery import recover_all_sessions_on_startup

        summary.update(
            recover_all_sessions_on_startup(
                config.SESSION_DIR, rebuild_index=True, state_db_path=config.STATE_DB_PATH
            )
        )
    except Exception as exc:  # noqa: BLE001 - startup goes on whatever the folder holds
        log.exception("startup recovery failed")
        summary["error"] = str(exc)
    try:
        from api import streaming

        summary["interrupted_turns"] = streaming.recover_interrupted_turns(config.SESSION_DIR)
    except Exception as exc:  # noqa: BLE001
        log.exception("marking interrupted turns failed")
        summary["interrupted_error"] = str(exc)
    log.info(
        "startup recovery: scanned %s, restored %s, orphaned backups %s, interrupted turns %s%s",
        summary.get("scanned"),
        summary.get("restored"),
        summary.get("orphaned_backups", 0),
        len(summary.get("interrupted_turns") or []),
        f", errors {summary['errors']}" if summary.get("errors") else "",
    )
    return summary


def build_auth(values: dict):
    """The auth manager (auth off when the password is empty); refuses a non-loopback host without one."""
    from api import auth

    auth.check_bind_allowed(values["host"], values["password"])
    if not values["password"]:
        secret = secrets.token_bytes(32)  # auth is off: nothing is signed, nothing to keep
    elif values["secret_key"]:
        secret = values["secret_key"].encode("utf-8")
        if len(secret) < 16:
            raise ValueError("secret_key must be at least 16 characters")
    else:
        secret = auth.load_or_create_secret(Path(values["state_dir"]))
    return auth.AuthManager(values["password"], secret)


def make_server(host: str, port: int, threads: int) -> TalariaServer:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    server_cls = type(
        "TalariaServer6" if family == socket.AF_INET6 else "TalariaServer4",
        (TalariaServer,),
        {"address_family": family},
    )
    return server_cls((host, port), Handler, threads)


def shutdown_sequence(server: TalariaServer) -> None:
    """After the accept loop stopped: end live turns, wait for requests in flight, flush the index."""
    from api import session_index

    server._stopping.set()
    try:
        from api import streaming

        streaming.shutdown()
    except Exception:  # noqa: BLE001
        log.exception("stopping live turns failed")
    if not server.wait_idle(SHUTDOWN_GRACE_S):
        log.warning("requests still running after %.0f s; exiting anyway", SHUTDOWN_GRACE_S)
    server.server_close()
    session_index.flush()


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    args = build_arg_parser().parse_args(argv)
    from api import config

    values = config.load_settings(
        overrides={
            "host": args.host,
            "port": args.port,
            "state_dir": args.state_dir,
            "hermes_home": args.hermes_home,
        }
    )
    config.apply_settings(values)
    try:
        auth = build_auth(values)
    except ValueError as exc:
        print(f"talaria: {exc}", file=sys.stderr)
        return 2
    Path(config.SESSION_DIR).mkdir(parents=True, exist_ok=True)
    summary = run_startup_recovery()

    from api import routes

    routes.configure(auth=auth, startup_recovery=summary)
    try:
        server = make_server(values["host"], values["port"], int(values["server_threads"]))
    except OSError as exc:
        print(f"talaria: cannot listen on {values['host']}:{values['port']}: {exc}", file=sys.stderr)
        return 1

    def stop(signum, _frame):
        log.info("signal %s: shutting down", signum)
        server._stopping.set()
        threading.Thread(target=server.shutdown, name="shutdown", daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    host, port = server.server_address[:2]
    shown = f"[{host}]" if ":" in host else host
    print(f"Talaria listening on http://{shown}:{port}", flush=True)
    try:
        server.serve_forever(poll_interval=0.25)
    finally:
        shutdown_sequence(server)
    log.info("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Run the real Talaria server as a subprocess on 127.0.0.1 for integration tests and benchmarks.

    with ServerProc(tmp_path) as srv:
        status, headers, body = srv.request("GET", "/api/sessions")
        data = srv.get_json("/api/sessions")

The server gets its own ``HERMES_HOME``, state folder and working folder under ``root`` (passed through
the environment), picks a free port itself (``--port 0``), and is ready once it printed its
``Talaria listening on`` line and ``/health`` answers. ``stop()`` sends SIGTERM (graceful), ``kill()``
SIGKILL (crash tests).
"""

from __future__ import annotations

import http.client
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import weakref
from pathlib import Path
from typing import Any

REPO_DIR = Path(__file__).resolve().parent.parent
_LISTENING = re.compile(r"Talaria listening on http://(\S+):(\d+)")
# Variables that would point the child at a real home, a real provider or a proxy.
_DROP_ENV = re.compile(r"^TALARIA_|^HERMES_|.*_API_KEY$|^(?:HTTP|HTTPS|ALL)_PROXY$", re.IGNORECASE)


class ServerProc:
    _instances: weakref.WeakSet[ServerProc] = weakref.WeakSet()

    @classmethod
    def instances(cls) -> list[ServerProc]:
        """Every ServerProc alive in this process (the leak check tells fixtures' servers from a test's)."""
        return list(cls._instances)

    def __init__(
        self,
        root: Path,
        *,
        env: dict[str, str] | None = None,
        args: list[str] | tuple[str, ...] = (),
        host: str = "127.0.0.1",
        password: str | None = None,
        startup_timeout: float = 30.0,
    ):
        self.root = Path(root)
        self.hermes_home = self.root / "hermes_home"
        self.state_dir = self.root / "webui_state"
        self.workspace = self.root / "workspace"
        self.session_dir = self.state_dir / "sessions"
        self.log_path = self.root / "server.log"
        self.home = self.root / "home"
        self.host = host
        self.port: int | None = None
        self.extra_env = dict(env or {})
        if password is not None:
            self.extra_env["TALARIA_PASSWORD"] = password
        self.args = list(args)
        self.startup_timeout = startup_timeout
        self.proc: subprocess.Popen | None = None
        self.output: list[str] = []
        self._ready = threading.Event()
        self._reader: threading.Thread | None = None
        ServerProc._instances.add(self)

    # ------------------------------------------------------------------ lifecycle

    def environment(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not _DROP_ENV.match(k)}
        env.update(
            HERMES_HOME=str(self.hermes_home),
            # A home of its own: the agent's login shells read no ~/.bashrc of this machine (a version
            # manager's lock there, left by a killed shell, stalls every later shell), and write nothing there.
            HOME=str(self.home),
            HERMES_WEBUI_STATE_DIR=str(self.state_dir),
            HERMES_WEBUI_DEFAULT_WORKSPACE=str(self.workspace),
            # Workspaces stay inside the server's own folder (the default roots are the home folder).
            TALARIA_WORKSPACE_ROOTS=str(self.root),
            NO_PROXY="127.0.0.1,localhost",
            no_proxy="127.0.0.1,localhost",
            # The agent's public catalogs (models.dev, provider model lists) meet a closed local port
            # instead of the network; 127.0.0.1 (the fake LLM) is exempt through NO_PROXY.
            HTTP_PROXY="http://127.0.0.1:9",
            HTTPS_PROXY="http://127.0.0.1:9",
            PYTHONUNBUFFERED="1",
            # A server that dies on a signal (SIGABRT, SIGSEGV) prints every thread's stack into its log.
            PYTHONFAULTHANDLER="1",
            # Most tests start servers that never run a turn: no background agent import for them.
            TALARIA_WARM_UP="0",
            # Nor the agent's cron scheduler child: the cron tests switch it on.
            TALARIA_CRON_SCHEDULER="0",
        )
        env.update(self.extra_env)
        return env

    def command(self) -> list[str]:
        return [sys.executable, str(REPO_DIR / "server.py"), "--host", self.host, "--port", "0", *self.args]

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self) -> ServerProc:
        """Start the server; refused while one is running (a second start would orphan the first)."""
        if self.running():
            raise RuntimeError("this ServerProc is already running; stop() it first")
        for folder in (self.hermes_home, self.state_dir, self.workspace, self.home):
            folder.mkdir(parents=True, exist_ok=True)
        self.output = []
        self._ready.clear()
        self.port = None
        self.proc = subprocess.Popen(
            self.command(),
            cwd=str(self.workspace),
            env=self.environment(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
        )
        self._reader = threading.Thread(target=self._read_output, args=(self.proc,), daemon=True)
        self._reader.start()
        deadline = time.monotonic() + self.startup_timeout
        while not self._ready.wait(0.05):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self._reader.join(2)
                code = self.proc.poll()
                self.kill()
                raise RuntimeError(f"server did not start (exit {code}):\n{self.log_text()[-4000:]}")
        while time.monotonic() < deadline:
            try:
                if self.request("GET", "/health", timeout=2)[0] == 200:
                    return self
            except OSError:
                pass
            time.sleep(0.05)
        self.kill()
        raise RuntimeError(f"/health never answered:\n{self.log_text()[-4000:]}")

    def _read_output(self, proc: subprocess.Popen) -> None:
        assert proc.stdout is not None
        # The pipe is closed here, at the server's end of output; left to the garbage collector it warns.
        with proc.stdout, open(self.log_path, "a", encoding="utf-8") as log:
            for line in proc.stdout:
                self.output.append(line)
                log.write(line)
                log.flush()
                match = _LISTENING.search(line)
                if match and not self._ready.is_set():
                    self.port = int(match.group(2))
                    self._ready.set()

    def log_text(self) -> str:
        return "".join(self.output)

    def stop(self, timeout: float = 20.0) -> int | None:
        """SIGTERM and wait; the exit code (None when it had to be killed)."""
        if self.proc is None or self.proc.poll() is not None:
            return None if self.proc is None else self.proc.returncode
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return None
        finally:
            self._join_reader()

    def kill(self) -> None:
        """SIGKILL (a crash): nothing runs after it."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self._join_reader()

    def _join_reader(self) -> None:
        if self._reader is not None:
            self._reader.join(5)

    def restart(self) -> ServerProc:
        self.stop()
        return self.start()

    def __enter__(self) -> ServerProc:
        # ``with srv.start():`` and ``with srv:`` both mean one running server.
        return self if self.running() else self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # ------------------------------------------------------------------ HTTP

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        headers: dict[str, str] | None = None,
        timeout: float = 30.0,
    ) -> tuple[int, dict[str, str], bytes]:
        """``(status, headers, body)``; a dict/list body is sent as JSON, bytes/str as they are."""
        send_headers = dict(headers or {})
        data: bytes | None
        if body is None:
            data = None
        elif isinstance(body, bytes):
            data = body
        elif isinstance(body, str):
            data = body.encode("utf-8")
        else:
            data = json.dumps(body).encode("utf-8")
            send_headers.setdefault("Content-Type", "application/json")
        conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        try:
            conn.request(method, path, body=data, headers=send_headers)
            resp = conn.getresponse()
            return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
        finally:
            conn.close()

    def json(
        self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None
    ) -> tuple[int, Any]:
        status, _, raw = self.request(method, path, body, headers)
        return status, json.loads(raw) if raw else None

    def get_json(self, path: str, headers: dict[str, str] | None = None) -> Any:
        status, data = self.json("GET", path, headers=headers)
        if status != 200:
            raise AssertionError(f"GET {path} → {status}: {data}")
        return data

    def post_json(self, path: str, body: Any = None, headers: dict[str, str] | None = None) -> Any:
        status, data = self.json("POST", path, {} if body is None else body, headers)
        if status != 200:
            raise AssertionError(f"POST {path} → {status}: {data}")
        return data

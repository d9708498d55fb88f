"""A scriptable OpenAI-compatible LLM server on 127.0.0.1 for tests.

In process::

    with FakeLLM() as llm:
        llm.script("Hello there", Reply(tool_calls=[{"name": "todo", "arguments": {...}}]))
        write_hermes_config(hermes_home, llm.base_url)

As a process (a test that starts Talaria in a subprocess points its config at it)::

    python -m talaria_testing.fake_llm --port-file F [--script JSON] [--context-length N]

and scripts it over ``/_control/*`` (see ``FakeLLMProcess``). Replies come from a queue; an empty
queue answers with an echo of the last user message. The compaction summarizer's request (its prompt
asks for a checkpoint summary) is answered from a separate summary queue or a default summary.

The server itself lives in ``talaria_testing.fake_llm_server`` and is re-exported here; this module
adds the agent configuration for tests and the out-of-process wrapper.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from talaria_testing.fake_llm_server import (  # noqa: F401 (re-exported: import them from here)
    DEFAULT_CONTEXT_LENGTH,
    DEFAULT_MODEL,
    DEFAULT_SUMMARY,
    SUMMARY_MARKERS,
    FakeLLM,
    Reply,
    _Handler,
    _Server,
    echo_reply,
    is_summary_request,
    message_text,
    split_tokens,
)
from talaria_testing.server_proc import ServerProc

# ----------------------------------------------------------------------------------------------
# Agent configuration for tests
# ----------------------------------------------------------------------------------------------


def _deep_merge(base: dict, extra: dict) -> dict:
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            _deep_merge(base[key], value)
        else:
            base[key] = value
    return base


def hermes_config(
    base_url: str,
    *,
    context_length: int = DEFAULT_CONTEXT_LENGTH,
    in_place: bool = True,
    model: str = DEFAULT_MODEL,
    api_key: str = "sk-test-1234",
    extra: dict | None = None,
) -> dict:
    """The config.yaml content that points hermes-agent at a fake server, offline and quiet."""
    config = {
        # The key must pass hermes' "usable secret" check (≥4 chars, not a placeholder like "dummy").
        "model": {
            "provider": "custom",
            "base_url": base_url,
            "default": model,
            "api_key": api_key,
            "context_length": context_length,
        },
        "agent": {"api_max_retries": 1, "environment_probe": False},
        "compression": {"in_place": in_place},
        "skills": {"creation_nudge_interval": 0},
        "memory": {"memory_enabled": False, "user_profile_enabled": False},
    }
    return _deep_merge(config, extra or {})


def agent_server(
    root: str | os.PathLike,
    base_url: str | None,
    *,
    toolsets: str = "none",
    env: dict | None = None,
    password: str | None = None,
    **config,
) -> ServerProc:
    """The real server, not started yet, with ``toolsets`` enabled and its agent pointed at the fake at
    ``base_url`` (``config`` as for ``hermes_config``); with None the home's config is left as it is."""
    settings = {"TALARIA_AGENT_TOOLSETS": toolsets, **(env or {})}
    server = ServerProc(Path(root), env=settings, password=password)
    if base_url is not None:
        write_hermes_config(server.hermes_home, base_url, **config)
    return server


def file_agent_server(
    root: str | os.PathLike, base_url: str | None, *, env: dict | None = None, **config
) -> ServerProc:
    """``agent_server`` with the agent's file tools, its sessions' workspaces kept under ``root``."""
    settings = {"TALARIA_WORKSPACE_ROOTS": str(root), **(env or {})}
    return agent_server(root, base_url, toolsets="file", env=settings, **config)


def refused_base_url() -> str:
    """An OpenAI-style base URL on 127.0.0.1 where nothing listens (the port was free a moment ago)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def write_hermes_config(hermes_home: str | os.PathLike, base_url: str, **options) -> Path:
    """Write ``$HERMES_HOME/config.yaml`` for a fake server (options as for ``hermes_config``)."""
    path = Path(hermes_home) / "config.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".yaml.tmp")
    tmp.write_text(yaml.safe_dump(hermes_config(base_url, **options), sort_keys=False), encoding="utf-8")
    os.replace(tmp, path)
    return path


# ----------------------------------------------------------------------------------------------
# Out-of-process use
# ----------------------------------------------------------------------------------------------


class FakeLLMProcess:
    """The fake as a child process, scripted through its control API (for tests of a subprocess server)."""

    def __init__(
        self,
        port_file: str | os.PathLike,
        *,
        context_length: int = DEFAULT_CONTEXT_LENGTH,
        script: Iterable | None = None,
    ):
        self.port_file = Path(port_file)
        args = [sys.executable, "-m", "talaria_testing.fake_llm", "--port-file", str(self.port_file)]
        args += ["--context-length", str(context_length)]
        if script is not None:
            args += ["--script", json.dumps(list(script))]
        self.port_file.unlink(missing_ok=True)
        self.proc = subprocess.Popen(args, cwd=Path(__file__).resolve().parent.parent)
        deadline = time.monotonic() + 15
        while not self.port_file.exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("fake LLM process did not start")
            time.sleep(0.02)
        self.port = int(self.port_file.read_text())
        self.url = f"http://127.0.0.1:{self.port}"
        self.base_url = f"{self.url}/v1"

    def _call(self, method: str, path: str, payload: Any = None) -> Any:
        data = None if payload is None else json.dumps(payload).encode()
        req = urllib.request.Request(
            self.url + path, data=data, method=method, headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(req, timeout=10) as resp:
            return json.loads(resp.read())

    def script(self, *items: Reply | str | dict, summaries: Iterable = ()) -> dict:
        def plain(i):
            return Reply.coerce(i).to_dict()

        return self._call(
            "POST",
            "/_control/script",
            {"replies": [plain(i) for i in items], "summaries": [plain(i) for i in summaries]},
        )

    def requests(self) -> list[dict]:
        return self._call("GET", "/_control/requests")["requests"]

    def state(self) -> dict:
        return self._call("GET", "/_control/state")

    def release(self) -> dict:
        return self._call("POST", "/_control/release", {})

    def reset(self) -> dict:
        return self._call("POST", "/_control/reset", {})

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def __enter__(self) -> FakeLLMProcess:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Scriptable OpenAI-compatible fake LLM server (tests only).")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--port-file", required=True, help="the bound port is written here once serving")
    parser.add_argument(
        "--script", default=None, help='JSON list of replies, or {"replies": [...], "summaries": [...]}'
    )
    parser.add_argument("--context-length", type=int, default=DEFAULT_CONTEXT_LENGTH)
    parser.add_argument("--model", default=DEFAULT_MODEL)
    opts = parser.parse_args(argv)
    fake = FakeLLM(port=opts.port, context_length=opts.context_length, model=opts.model)
    if opts.script:
        status, payload = fake._apply_control("/_control/script", json.loads(opts.script))
        if status != 200:
            parser.error(payload["error"])
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    fake.start()
    port_file = Path(opts.port_file)
    tmp = port_file.with_name(port_file.name + ".tmp")
    tmp.write_text(str(fake.port))
    os.replace(tmp, port_file)  # readers never see a half-written port
    while not stop.wait(0.5):
        pass
    fake.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The person's MCP servers (the ``mcp_servers:`` section of the agent's ``config.yaml``), through the
agent's own MCP machinery (``tools.mcp_tool``): discovery in the background at start and again whenever
that section changes, and each server's state and tools for the page.

Discovery never runs on a request path. The agent bounds each connection (a server's
``connect_timeout``), registers a connected server's tools as the toolset ``mcp-<name>`` and refreshes
a built agent's tools between turns, so a slow or broken server delays neither the start nor a turn: its
tools simply arrive once it answers. A change of the section reconnects every server, as the agent's own
``/reload-mcp`` does.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import threading
from dataclasses import dataclass, field
from typing import Any

from api.agent import agent_runtime
from api.store.in_use import InUse

log = logging.getLogger("talaria.mcp")

# How often the watcher looks at config.yaml's modification time (a parse follows only a change).
POLL_S = 2.0
_DESCRIPTION_MAX = 300
_DEFAULT_CONNECT_TIMEOUT_S = 60  # the agent's own default for a server without connect_timeout


def _mcp_tool() -> Any:
    return agent_runtime.agent_module("tools.mcp_tool")


def mcp_available() -> bool:
    """Whether the agent's ``mcp`` extra is installed (its machinery does nothing without it)."""
    return importlib.util.find_spec("mcp") is not None


def configured_section() -> dict[str, Any]:
    """The ``mcp_servers`` section of the agent's config.yaml, as written."""
    section = agent_runtime.agent_module("hermes_cli.config").load_config().get("mcp_servers")
    return {str(name): cfg for name, cfg in section.items()} if isinstance(section, dict) else {}


def _fingerprint(section: dict[str, Any]) -> str:
    return json.dumps(section, sort_keys=True, default=str)


@dataclass
class Discovery:
    """The background discovery and its watch of the configuration (one per process: the app's, a worker's)."""

    poll_s: float = POLL_S
    state: str = "idle"  # idle → discovering → ready (again discovering after a change)
    error: str = ""
    rounds: int = 0
    _stamp: str = ""
    _fingerprint: str | None = None
    # Set once a round has ended (tools registered, nothing configured, or failed): a new worker waits on it.
    settled: threading.Event = field(default_factory=threading.Event)
    _stop: threading.Event = field(default_factory=threading.Event)
    _wake: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _servers_started: bool = False
    _reload_requested: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> threading.Thread:
        thread = threading.Thread(target=self._run, name="mcp-discovery", daemon=True)
        self._thread = thread
        thread.start()
        return thread

    def stop(self, timeout: float = 15.0) -> None:
        """Stop watching and close every server connection (their stdio processes end with it)."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)
        if not self._servers_started:
            return
        try:
            _mcp_tool().shutdown_mcp_servers()
        except Exception:  # noqa: BLE001 - closing is best effort at shutdown
            log.debug("closing the MCP servers failed", exc_info=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.check_once()
            except Exception as exc:  # noqa: BLE001 - a failed round is reported and retried at the next change
                log.warning("MCP discovery failed: %s: %s", type(exc).__name__, exc)
                with self._lock:
                    self.state, self.error = "ready", f"{type(exc).__name__}: {exc}"
            self.settled.set()
            self._wake.wait(self.poll_s)
            self._wake.clear()

    def check_once(self) -> bool:
        """Discover when the section is new or changed; True when a round ran."""
        stamp = agent_runtime.config_stamp()
        with self._lock:
            forced, self._reload_requested = self._reload_requested, False
        if stamp == self._stamp and not forced:
            return False
        self._stamp = stamp
        if not mcp_available():
            with self._lock:
                self.state, self.error = "ready", "The agent's mcp extra is not installed."
            return False
        section = configured_section()
        fingerprint = _fingerprint(section)
        if fingerprint == self._fingerprint and not forced:
            return False
        first = self._fingerprint is None
        self._fingerprint = fingerprint
        with self._lock:
            self.state, self.error = "discovering", ""
        tool = _mcp_tool()
        if not first:
            log.info("mcp_servers changed: reconnecting")
            tool.shutdown_mcp_servers()
        self._servers_started = self._servers_started or bool(section)
        names = tool.discover_mcp_tools() if section else []
        with self._lock:
            self.state = "ready"
            self.rounds += 1
        if section:
            log.info("MCP: %d tool(s) from %d configured server(s)", len(names), len(section))
        return True

    def request_reload(self) -> None:
        """Reconnect every server at the watcher's next round, now (as the agent's ``/reload-mcp``)."""
        with self._lock:
            self._reload_requested = True
            self.state = "discovering"
        self._wake.set()

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            return {"discovery": self.state, "error": self.error, "rounds": self.rounds}


# The app's (``App.discovery``), else built on first use: a worker process, which has no app, discovers too.
DISCOVERY: InUse[Discovery] = InUse(Discovery)


def start_discovery() -> threading.Thread:
    return DISCOVERY.get().start()


def request_reload(discovery: Discovery | None = None) -> dict[str, Any]:
    """Discover the servers again (``discovery``: the app's; the one in use when None)."""
    discovery = DISCOVERY.get(discovery)
    discovery.request_reload()
    return {"ok": True, **discovery.snapshot()}


def _server_tools(name: str) -> list[dict[str, str]]:
    registry = agent_runtime.agent_module("tools.registry").registry
    rows = []
    for tool_name in sorted(registry.get_tool_names_for_toolset(f"mcp-{name}")):
        schema = registry.get_schema(tool_name) or {}
        description = str(schema.get("description") or "")
        rows.append({"name": tool_name, "description": description[:_DESCRIPTION_MAX]})
    return rows


# The agent reports a connection its ``connect_timeout`` cut short by the exception's bare name.
_TIMEOUT_ERRORS = {"", "CancelledError", "TimeoutError"}


def _failure_text(error: str, cfg: Any) -> str:
    if error.strip() not in _TIMEOUT_ERRORS:
        return error
    timeout = cfg.get("connect_timeout", _DEFAULT_CONNECT_TIMEOUT_S) if isinstance(cfg, dict) else None
    return f"It did not answer within {timeout} s (its connect_timeout in config.yaml)."


def servers(discovery: Discovery | None = None) -> dict[str, Any]:
    """Each configured server: ``name``, ``transport``, ``status`` (connected, connecting, failed,
    disabled, configured), ``tools`` (count), ``error`` when it failed; and the state of ``discovery`` (the
    app's; the one in use when None)."""
    rows: list[dict[str, Any]] = []
    if mcp_available():
        section = configured_section()
        for entry in _mcp_tool().get_mcp_status():
            name = str(entry.get("name"))
            row: dict[str, Any] = {
                "name": name,
                "transport": str(entry.get("transport") or ""),
                "status": str(entry.get("status") or ""),
                "tools": int(entry.get("tools") or 0),
            }
            if row["status"] == "failed":
                row["error"] = _failure_text(str(entry.get("error") or ""), section.get(name))
            rows.append(row)
    return {"servers": rows, "available": mcp_available(), **DISCOVERY.get(discovery).snapshot()}


def tools(discovery: Discovery | None = None) -> dict[str, Any]:
    """The tools each connected server offers (the names the model sees, and their descriptions)."""
    listing = servers(discovery)
    return {
        "servers": [
            {**row, "tool_list": _server_tools(row["name"]) if row["status"] == "connected" else []}
            for row in listing["servers"]
        ]
    }


def server_toolsets(discovery: Discovery | None = None) -> list[dict[str, Any]]:
    """The enabled servers as rows of the tools menu, each with its state (as ``discovery``, the app's, found
    it): the agent takes a server's name as its toolset."""
    if not mcp_available():
        return []
    agent_config = agent_runtime.agent_module("hermes_cli.config").load_config()
    names = agent_runtime.agent_module("hermes_cli.tools_config").enabled_mcp_server_names(agent_config)
    section = configured_section()
    states = {row["name"]: row for row in servers(discovery)["servers"]}
    rows = []
    for name in sorted(str(name) for name in names):
        cfg = section.get(name)
        described = cfg.get("description") if isinstance(cfg, dict) else None
        state = states.get(name, {})
        rows.append(
            {
                "name": name,
                "label": f"MCP: {name}",
                "description": str(described or "Tools of this MCP server"),
                "mcp": {
                    "status": state.get("status", "configured"),
                    "tools": state.get("tools", 0),
                    "error": state.get("error", ""),
                },
            }
        )
    return rows

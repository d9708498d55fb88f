"""A real MCP server over stdio for tests, written with the ``mcp`` package.

    python talaria_testing/mcp_server.py ok      # tools: add (the sum of two integers), crash (exits mid-call)
    python talaria_testing/mcp_server.py hang    # reads the client's requests and never answers

It is started by the agent as an ``mcp_servers:`` entry of a test's ``config.yaml`` (``entry(mode)``:
``command`` the test's Python, ``args`` this file's path): run as a script, it needs nothing from the
repository. ``wait_for_states`` polls a running server's ``/api/mcp/servers`` until the servers reach
the wanted states.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

CONNECT_TIMEOUT_S = 4


def entry(mode: str, **extra: Any) -> dict[str, Any]:
    """An ``mcp_servers:`` entry that starts this server in ``mode`` (``ok`` or ``hang``)."""
    script = str(Path(__file__).resolve())
    return {"command": sys.executable, "args": [script, mode], "connect_timeout": CONNECT_TIMEOUT_S, **extra}


def states(srv: Any) -> dict[str, dict]:
    return {row["name"]: row for row in srv.get_json("/api/mcp/servers")["servers"]}


def wait_for_states(srv: Any, wanted: dict[str, str], timeout: float = 60.0) -> dict[str, dict]:
    """The servers' rows once each named server has the wanted status (AssertionError after ``timeout``)."""
    deadline = time.monotonic() + timeout
    rows: dict[str, dict] = {}
    while time.monotonic() < deadline:
        rows = states(srv)
        if {name: rows.get(name, {}).get("status") for name in wanted} == wanted:
            return rows
        time.sleep(0.2)
    raise AssertionError(f"MCP servers never reached {wanted}: {rows}")


def serve_tools() -> None:
    from mcp.server.fastmcp import FastMCP

    server = FastMCP("talaria-test")

    @server.tool()
    def add(a: int, b: int) -> str:
        """Add two integers and say the sum."""
        return f"sum={a + b}"

    @server.tool()
    def crash() -> str:
        """Exit the server process in the middle of the call."""
        os._exit(3)

    server.run("stdio")


def hang() -> None:
    # Hold the connection without ever answering initialize; exit when the client closes stdin.
    while sys.stdin.buffer.read(65536):
        pass


if __name__ == "__main__":
    mode = sys.argv[1] if len(sys.argv) > 1 else "ok"
    if mode == "hang":
        hang()
    else:
        serve_tools()

"""The MCP servers' discovery and how their state reads in the page (the agent's machinery runs for real
in tests/integration/test_mcp_servers.py)."""

from __future__ import annotations

import os

import yaml

from api.agent import mcp_servers
from api.store import config


def test_a_connection_cut_short_by_its_timeout_says_so_in_words():
    text = mcp_servers._failure_text("CancelledError", {"connect_timeout": 7})
    assert text == "It did not answer within 7 s (its connect_timeout in config.yaml)."
    assert "within 60 s" in mcp_servers._failure_text("", {})


def test_a_servers_own_error_is_shown_as_the_agent_gave_it():
    assert mcp_servers._failure_text("command not found: npx", {}) == "command not found: npx"


def test_discovery_runs_again_only_when_the_section_changes(monkeypatch):
    calls: list[str] = []
    tool = type(
        "FakeMcpTool",
        (),
        {
            "discover_mcp_tools": staticmethod(lambda: calls.append("discover") or []),
            "shutdown_mcp_servers": staticmethod(lambda: calls.append("shutdown")),
        },
    )
    monkeypatch.setattr(mcp_servers, "_mcp_tool", lambda: tool)
    path = config.HERMES_HOME / "config.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)

    def write(doc: dict, stamp: int) -> None:
        path.write_text(yaml.safe_dump(doc), encoding="utf-8")
        os.utime(path, ns=(stamp, stamp))

    discovery = mcp_servers.Discovery()
    try:
        write({"mcp_servers": {"a": {"command": "true"}}}, 1_000_000_000)
        assert discovery.check_once() and calls == ["discover"]
        assert not discovery.check_once()  # nothing changed
        write({"mcp_servers": {"a": {"command": "true"}}, "other": 1}, 2_000_000_000)
        assert not discovery.check_once()  # the file changed, the section did not
        write({"mcp_servers": {"b": {"command": "true"}}}, 3_000_000_000)
        assert discovery.check_once() and calls == ["discover", "shutdown", "discover"]
        assert discovery.snapshot() == {"discovery": "ready", "error": "", "rounds": 2}
    finally:
        path.unlink()

"""The person's MCP servers reach the agent's turns: real MCP servers over stdio (``talaria_testing/
mcp_server.py``, written with the ``mcp`` package), the real server and agent, the fake LLM calling their
tools. One server works, one never answers its start (it is reported, never waited for), one crashes in
the middle of a call (the turn ends with the tool's error saved, and the next turn works)."""

from __future__ import annotations

import pytest
import yaml

from talaria_testing.chat_client import chat, new_session, on_disk, text_of
from talaria_testing.fake_llm import Reply, agent_server
from talaria_testing.mcp_server import entry, wait_for_states

pytestmark = pytest.mark.integration

SERVERS = {"demo": entry("ok"), "stuck": entry("hang"), "flaky": entry("ok")}


@pytest.fixture(scope="module")
def srv(llm, tmp_path_factory):
    server = agent_server(
        tmp_path_factory.mktemp("mcp"),
        llm.base_url,
        toolsets="demo,flaky",
        env={"TALARIA_CHECKPOINT_INTERVAL": "0.2"},
        extra={"mcp_servers": SERVERS},
    )
    with server:
        yield server


def _tool_rows(srv, sid: str) -> list[dict]:
    return [m for m in on_disk(srv, sid)["messages"] if m.get("role") == "tool"]


def test_the_start_never_waits_for_a_server_that_does_not_answer(srv):
    assert srv.get_json("/health")["ok"] is True
    rows = wait_for_states(srv, {"demo": "connected", "stuck": "failed"})
    assert rows["demo"]["tools"] >= 2 and rows["demo"]["transport"] == "stdio"
    assert rows["stuck"]["error"] == "It did not answer within 4 s (its connect_timeout in config.yaml)."


def test_a_turn_calls_a_configured_servers_tool_and_its_result_is_saved(srv, llm):
    wait_for_states(srv, {"demo": "connected", "flaky": "connected"})
    sid = new_session(srv)
    llm.script(
        Reply(tool_calls=[{"name": "mcp__demo__add", "arguments": {"a": 2, "b": 40}}]),
        Reply(text="The sum is 42."),
    )
    assert text_of(chat(srv, sid, "add 2 and 40")).strip() == "The sum is 42."
    offered = {tool["function"]["name"] for tool in llm.chat_requests()[0]["body"]["tools"]}
    assert {"mcp__demo__add", "mcp__flaky__crash"} <= offered
    assert not any(name.startswith("mcp__stuck__") for name in offered)
    assert "sum=42" in str(_tool_rows(srv, sid)[-1]["content"])


def test_a_server_that_crashes_mid_call_ends_the_call_with_an_error_and_the_next_turn_works(srv, llm):
    wait_for_states(srv, {"demo": "connected", "flaky": "connected"})
    sid = new_session(srv)
    llm.script(
        Reply(tool_calls=[{"name": "mcp__flaky__crash", "arguments": {}}]),
        Reply(text="That server failed."),
        Reply(tool_calls=[{"name": "mcp__demo__add", "arguments": {"a": 1, "b": 1}}]),
        Reply(text="Still here."),
    )
    assert text_of(chat(srv, sid, "crash it")).strip() == "That server failed."
    crashed = _tool_rows(srv, sid)[-1]
    assert "error" in str(crashed["content"]).lower()
    assert text_of(chat(srv, sid, "and now add")).strip() == "Still here."
    assert "sum=2" in str(_tool_rows(srv, sid)[-1]["content"])


def test_the_tools_menu_and_the_tool_list_show_the_servers(srv):
    wait_for_states(srv, {"demo": "connected"})
    menu = {row["name"]: row for row in srv.get_json("/api/toolsets")["toolsets"]}
    assert menu["demo"]["label"] == "MCP: demo" and menu["demo"]["enabled"]
    listed = {row["name"]: row for row in srv.get_json("/api/mcp/tools")["servers"]}
    names = {tool["name"] for tool in listed["demo"]["tool_list"]}
    assert {"mcp__demo__add", "mcp__demo__crash"} <= names
    assert listed["stuck"]["tool_list"] == []


def test_a_change_of_the_section_is_discovered_again(srv):
    wait_for_states(srv, {"demo": "connected"})
    path = srv.hermes_home / "config.yaml"
    config = yaml.safe_load(path.read_text())
    config["mcp_servers"] = {"demo": SERVERS["demo"], "second": entry("ok")}
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    rows = wait_for_states(srv, {"demo": "connected", "second": "connected"})
    assert "stuck" not in rows and "flaky" not in rows

"""Routes for the agent's toolbox: its MCP servers, memory, skills, slash commands, a session's reasoning effort and usage, the settings a person changes often (hermes-webui's
names: ``/api/mcp/servers``, ``/api/mcp/tools``, ``/api/memory``, ``/api/memory/write``, ``/api/skills``,
``/api/commands``, ``/api/reasoning``, ``/api/session/usage``, ``/api/settings``). Thin handlers as in ``api.web.routes`` (parse → one domain call → ``j``); ``api.web.routes``
merges ``ROUTES``.
"""

from __future__ import annotations

from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from typing import Any

from api.agent import agent_commands, agent_memory, agent_skills, mcp_servers, reasoning, settings_edit
from api.services import session_usage
from api.web.http_io import j, require_session_id
from api.web.served import app_of


def _handle_mcp_servers(handler: BaseHTTPRequestHandler, _query: dict[str, Any]) -> None:
    j(handler, mcp_servers.servers(app_of(handler).discovery))


def _handle_mcp_tools(handler: BaseHTTPRequestHandler, _query: dict[str, Any]) -> None:
    j(handler, mcp_servers.tools(app_of(handler).discovery))


def _handle_mcp_reload(handler: BaseHTTPRequestHandler, _body: dict[str, Any]) -> None:
    j(handler, mcp_servers.request_reload(app_of(handler).discovery))


def _handle_memory(handler: BaseHTTPRequestHandler, _query: dict[str, Any]) -> None:
    j(handler, agent_memory.read_all())


def _handle_memory_write(handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
    j(
        handler,
        {"file": agent_memory.write(body.get("target"), body.get("content"), body.get("base_version"))},
    )


def _handle_skills(handler: BaseHTTPRequestHandler, _query: dict[str, Any]) -> None:
    j(handler, agent_skills.list_skills())


def _handle_skill_view(handler: BaseHTTPRequestHandler, query: dict[str, Any]) -> None:
    j(handler, {"skill": agent_skills.read_skill(query.get("name"))})


def _handle_skill_toggle(handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
    j(handler, {"skill": agent_skills.set_enabled(body.get("name"), body.get("enabled"))})


def _handle_skill_save(handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
    j(
        handler,
        {"skill": agent_skills.save_skill(body.get("name"), body.get("content"), body.get("base_version"))},
    )


def _handle_skill_invoke(handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
    j(handler, agent_skills.invocation(body.get("command"), body.get("instruction", "")))


def _handle_skills_reload(handler: BaseHTTPRequestHandler, _body: dict[str, Any]) -> None:
    j(handler, agent_commands.reload_skills())


def _handle_session_usage(handler: BaseHTTPRequestHandler, query: dict[str, Any]) -> None:
    sid, store = require_session_id(query.get("session_id")), app_of(handler).store
    j(handler, session_usage.session_usage(sid, store=store))


def _handle_reasoning(handler: BaseHTTPRequestHandler, query: dict[str, Any]) -> None:
    sid, app = query.get("session_id"), app_of(handler)
    if sid is None:
        model, provider = query.get("model", ""), query.get("model_provider", "")
        j(handler, reasoning.model_reasoning(model, provider, app.agent_answers))
    else:
        j(handler, reasoning.session_reasoning(require_session_id(sid), app.agent_answers, store=app.store))


def _handle_set_reasoning(handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
    sid, store = require_session_id(body.get("session_id")), app_of(handler).store
    j(handler, reasoning.set_session_reasoning(sid, body.get("effort"), store=store))


def _handle_settings(handler: BaseHTTPRequestHandler, _query: dict[str, Any]) -> None:
    j(handler, settings_edit.list_settings())


def _handle_settings_update(handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
    j(handler, settings_edit.update_settings(body.get("settings")))


def _handle_commands(handler: BaseHTTPRequestHandler, _query: dict[str, Any]) -> None:
    j(handler, agent_commands.list_commands())


ROUTES: dict[tuple[str, str], Callable[[Any, dict[str, Any]], None]] = {
    ("GET", "/api/mcp/servers"): _handle_mcp_servers,
    ("GET", "/api/mcp/tools"): _handle_mcp_tools,
    ("POST", "/api/mcp/reload"): _handle_mcp_reload,
    ("GET", "/api/memory"): _handle_memory,
    ("POST", "/api/memory/write"): _handle_memory_write,
    ("GET", "/api/skills"): _handle_skills,
    ("GET", "/api/skills/view"): _handle_skill_view,
    ("POST", "/api/skills/toggle"): _handle_skill_toggle,
    ("POST", "/api/skills/save"): _handle_skill_save,
    ("POST", "/api/skills/invoke"): _handle_skill_invoke,
    ("POST", "/api/skills/reload"): _handle_skills_reload,
    ("GET", "/api/commands"): _handle_commands,
    ("GET", "/api/settings"): _handle_settings,
    ("POST", "/api/settings"): _handle_settings_update,
    ("GET", "/api/session/usage"): _handle_session_usage,
    ("GET", "/api/reasoning"): _handle_reasoning,
    ("POST", "/api/reasoning"): _handle_set_reasoning,
}

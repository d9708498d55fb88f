"""Tools per session: the agent's toolsets with a short description, and each session's choice.

A session's ``enabled_toolsets`` is a list of toolset names, or ``None`` for the default: the
``agent_toolsets`` setting when set, else the toolsets the agent's own configuration enables for its
CLI (``hermes tools``), the person's MCP servers included (a server's name is its toolset). The list and
the defaults come from the agent (``hermes_cli.tools_config``).

When set, ``agent_toolsets`` is also a ceiling: a session chooses among those toolsets only (a toolset
whose tools all belong to them counts as inside), and a choice saved before the setting changed is cut
to it when a turn runs. ``none`` allows no tool at all. A toolset the agent's own requirement check finds
unusable here (a missing key) is listed unavailable too (``api.agent.toolset_availability``).
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from api.agent import agent_runtime, mcp_servers, toolset_availability
from api.agent.agent_answers import AgentAnswers
from api.rules.errors import BadRequest
from api.store import config as _config
from api.store import models, session_edit, session_lookup

_NAME_MAX = 100
_LIST_MAX = 200


def setting_toolsets() -> list[str] | None:
    """The ``agent_toolsets`` setting: None when empty, [] for ``none``, else the named toolsets."""
    raw = str(_config.setting("agent_toolsets") or "").strip()
    if not raw:
        return None
    if raw.lower() == "none":
        return []
    return [name.strip() for name in raw.split(",") if name.strip()]


def _resolve(name: str) -> set[str]:
    """The tools a toolset stands for, by the agent's own resolution (composites included)."""
    return set(agent_runtime.agent_module("toolsets").resolve_toolset(name))


def allowed(name: str, ceiling: list[str] | None) -> bool:
    """Whether the setting lets a session use the toolset ``name`` (``ceiling`` None: no limit)."""
    if ceiling is None or name in ceiling:
        return True
    tools = _resolve(name)
    return bool(tools) and tools <= set().union(*(_resolve(top) for top in ceiling))


def _capped(names: list[str]) -> list[str]:
    ceiling = setting_toolsets()
    return [name for name in names if allowed(name, ceiling)]


def _unavailable_reason() -> str:
    raw = str(_config.setting("agent_toolsets") or "").strip()
    return f"Not allowed on this server (TALARIA_AGENT_TOOLSETS={raw})"


def _tools_config() -> ModuleType:
    return agent_runtime.agent_module("hermes_cli.tools_config")


def default_toolsets() -> list[str]:
    """What a session without its own choice runs with."""
    configured = setting_toolsets()
    if configured is not None:
        return configured
    tools_config = _tools_config()
    agent_config = agent_runtime.agent_module("hermes_cli.config").load_config()
    # The person's MCP servers are on by default, as in the agent's CLI (each server's name is its toolset).
    return sorted(tools_config._get_platform_tools(agent_config, "cli", include_default_mcp_servers=True))


def session_toolsets(session: Any) -> list[str]:
    """The toolsets a session's next turn runs with."""
    chosen = getattr(session, "enabled_toolsets", None)
    return _capped(list(chosen)) if isinstance(chosen, list) else default_toolsets()


def available_toolsets(discovery: mcp_servers.Discovery | None = None) -> list[dict[str, Any]]:
    """``[{name, label, description}]`` in the agent's order (built-in, then plugins), then the MCP servers
    (as ``discovery``, the app's, found them)."""
    tools_config = _tools_config()
    rows = []
    for name, label, description in tools_config._get_effective_configurable_toolsets():
        rows.append(
            {"name": name, "label": tools_config.gui_toolset_label(label), "description": description}
        )
    return rows + mcp_servers.server_toolsets(discovery)


def list_for_session(
    sid: str | None,
    *,
    answers: AgentAnswers | None = None,
    discovery: mcp_servers.Discovery | None = None,
    store: models.Store | None = None,
) -> dict[str, Any]:
    """Every toolset with ``enabled`` for the session (or for a new session when ``sid`` is None), and
    ``available``/``unavailable_reason`` by the setting's ceiling; ``answers`` and ``discovery`` are the
    app's (those in use when None)."""
    chosen = None
    if sid is not None:
        chosen = session_lookup.load_session(sid, store=store).enabled_toolsets
    ceiling = setting_toolsets()
    enabled = set(chosen) if isinstance(chosen, list) else set(default_toolsets())
    needs = toolset_availability.unavailable_reasons(answers)
    rows = []
    for row in available_toolsets(discovery):
        ok = allowed(row["name"], ceiling)
        reasons = [] if ok else [_unavailable_reason()]
        if "mcp" not in row and row["name"] in needs:  # a server's own state says why it has no tools
            ok, reasons = False, [*reasons, needs[row["name"]]]
        reason = " ".join(reasons) or None
        rows.append(
            {**row, "enabled": ok and row["name"] in enabled, "available": ok, "unavailable_reason": reason}
        )
    return {
        "toolsets": rows,
        "enabled_toolsets": chosen if isinstance(chosen, list) else None,
        "default_toolsets": sorted(set(default_toolsets())),
        "allowed_toolsets": ceiling,
    }


def clean_choice(value: Any, known: set[str]) -> list[str] | None:
    """A session's toolset choice, validated against the known names (pure)."""
    if value is None:
        return None
    if not isinstance(value, list) or len(value) > _LIST_MAX:
        raise BadRequest("enabled_toolsets must be a list of toolset names or null")
    names: list[str] = []
    for name in value:
        if not isinstance(name, str) or not name.strip() or len(name) > _NAME_MAX:
            raise BadRequest("enabled_toolsets must be a list of toolset names or null")
        if name not in known:
            raise BadRequest(f"Unknown toolset {name!r}")
        if name not in names:
            names.append(name)
    return names


def set_session_toolsets(
    sid: str, value: Any, *, discovery: mcp_servers.Discovery | None = None, store: models.Store | None = None
) -> dict[str, Any]:
    """Set (or with ``None`` reset) the toolsets of the session's next turn; the sidebar row after it."""
    session_lookup.load_session(sid, store=store)
    known = {row["name"] for row in available_toolsets(discovery)} | set(default_toolsets())
    choice = clean_choice(value, known)
    ceiling = setting_toolsets()
    for name in choice or []:
        if not allowed(name, ceiling):
            raise BadRequest(f"Toolset {name!r}: {_unavailable_reason()}")
    with session_edit.edit(sid, touch_updated_at=False, store=store) as session:
        session.enabled_toolsets = choice
    return session.compact()

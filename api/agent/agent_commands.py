"""The agent's slash commands that make sense in a web session, for the composer: from the agent's own
command registry (``hermes_cli.commands.COMMAND_REGISTRY``: name, help, argument hint) and its skill
commands (one ``/<skill>`` per enabled skill). The page runs each of them with its own controls; the
commands Talaria itself adds (``/compress``, ``/undo``…) are the page's.
"""

from __future__ import annotations

from typing import Any

from api.agent import agent_runtime

# The agent's commands the page runs, by the agent's name (each maps to a control the page has), with the
# argument hint and help where the page's version differs from the agent's CLI.
WEB_COMMANDS: dict[str, dict[str, str]] = {
    "new": {"args": ""},
    "model": {"args": "[model]", "help": "Switch this session's model for its next answers"},
    "help": {},
    "usage": {"args": "", "help": "Show what this session's answers cost: tokens, and the price where known"},
    "reasoning": {
        "args": "[level|default]",
        "help": "Set this session's reasoning effort (for models that take one)",
    },
    "goal": {
        "args": "[text | status | pause | resume | clear]",
        "help": "Set a standing goal the agent works toward turn after turn until its judge says done",
    },
    "reload-mcp": {},
    "reload-skills": {},
}


def list_commands() -> dict[str, Any]:
    """``{"commands": [{name, args, help, kind: "agent"|"skill"}]}``."""
    registry = agent_runtime.agent_module("hermes_cli.commands").COMMAND_REGISTRY
    by_name = {command.name: command for command in registry}
    rows = [
        {
            "name": name,
            "args": page.get("args", by_name[name].args_hint),
            "help": page.get("help", by_name[name].description),
            "kind": "agent",
        }
        for name, page in WEB_COMMANDS.items()
        if name in by_name
    ]
    skill_commands = agent_runtime.agent_module("agent.skill_commands").get_skill_commands()
    for key, info in sorted(skill_commands.items()):
        rows.append(
            {
                "name": key.lstrip("/"),
                "args": "[instruction]",
                "help": str(info.get("description") or f"Use the skill {info.get('name')}"),
                "kind": "skill",
            }
        )
    return {"commands": rows}


def reload_skills() -> dict[str, Any]:
    """Scan the skills folders again (new or removed skills), as the agent's ``/reload-skills``."""
    result = agent_runtime.agent_module("agent.skill_commands").reload_skills()
    return result if isinstance(result, dict) else {"ok": True}

"""The agent's skills for the page, through its own skills machinery: the installed skills with their
source (``builtin`` from the agent's bundle, ``hub`` from its skills hub, ``local`` the person's own),
one skill's ``SKILL.md``, turning a skill on or off in ``skills.disabled`` with the agent's config writer,
editing a skill the person owns (durable, refused when the file changed since it was read), and the
message a skill's slash command sends (the agent's own ``build_skill_invocation_message``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

from api.agent import agent_memory, agent_runtime
from api.rules.errors import BadRequest, Conflict, NotFound
from api.store import atomic

_NAME_MAX = 64
_CONTENT_MAX = 256 * 1024
_INSTRUCTION_MAX = 20_000


def _module(name: str) -> Any:
    return agent_runtime.agent_module(name)


def _sources() -> tuple[dict[str, dict[str, Any]], set[str]]:
    # Read only: the hub's lock file names the skills it installed (a missing file, none).
    installed = {entry["name"]: entry for entry in _module("tools.skills_hub").HubLockFile().list_installed()}
    return installed, set(_module("tools.skills_sync")._read_manifest())


def _source_of(name: str, hub_installed: dict[str, dict[str, Any]], builtin: set[str]) -> str:
    if name in hub_installed:
        return "hub"
    return "builtin" if name in builtin else "local"


def list_skills() -> dict[str, Any]:
    """Every installed skill, disabled ones included, ordered as the agent lists them."""
    skills_tool = _module("tools.skills_tool")
    found = skills_tool._sort_skills(skills_tool._find_all_skills(skip_disabled=True))
    disabled = _module("agent.skill_utils").get_disabled_skill_names()
    hub_installed, builtin = _sources()
    rows = []
    for skill in found:
        name = str(skill["name"])
        source = _source_of(name, hub_installed, builtin)
        rows.append(
            {
                "name": name,
                "description": str(skill.get("description") or ""),
                "category": skill.get("category") or "",
                "source": source,
                "enabled": name not in disabled,
                "editable": source == "local",
                "command": f"/{name.replace('_', '-').replace(' ', '-')}",
            }
        )
    return {"skills": rows}


def _clean_name(name: Any) -> str:
    if not isinstance(name, str) or not name.strip() or len(name) > _NAME_MAX:
        raise BadRequest("name must be a skill's name")
    return name.strip()


def _find(name: Any) -> dict[str, Any]:
    name = _clean_name(name)
    for row in list_skills()["skills"]:
        if row["name"] == name:
            return cast("dict[str, Any]", row)
    raise NotFound(f"No skill named {name!r}")


def _skill_file(name: str) -> Path:
    """The ``SKILL.md`` the agent reads for ``name`` (disabled skills included), found as it finds them."""
    skills_tool = _module("tools.skills_tool")
    skill_utils = _module("agent.skill_utils")
    folders = [skills_tool._skills_dir(), *skill_utils.get_external_skills_dirs()]
    for folder in folders:
        if not Path(folder).exists():
            continue
        for skill_md in skill_utils.iter_skill_index_files(folder, "SKILL.md"):
            data = agent_memory.read_bytes(Path(skill_md))
            frontmatter, _body = skills_tool._parse_frontmatter(
                (data or b"")[:4000].decode("utf-8", "replace")
            )
            if str(frontmatter.get("name") or Path(skill_md).parent.name) == name:
                return Path(skill_md)
    raise NotFound(f"No skill named {name!r}")


def read_skill(name: Any) -> dict[str, Any]:
    """One skill's row and its ``SKILL.md`` with the version a later save must name."""
    row = _find(name)
    data = agent_memory.read_bytes(_skill_file(row["name"]))
    if data is None:
        raise NotFound(f"The skill {row['name']!r} has no SKILL.md")
    return {
        **row,
        "content": data.decode("utf-8", errors="replace"),
        "version": agent_memory.version_of(data),
    }


def set_enabled(name: Any, enabled: Any) -> dict[str, Any]:
    """Turn a skill on or off for every platform, in ``skills.disabled`` as ``hermes skills`` does."""
    row = _find(name)
    if not isinstance(enabled, bool):
        raise BadRequest("enabled must be true or false")
    config_module = _module("hermes_cli.config")
    skills_config = _module("hermes_cli.skills_config")
    agent_config = config_module.load_config()
    disabled = skills_config.get_disabled_skills(agent_config)
    if enabled:
        disabled.discard(row["name"])
    else:
        disabled.add(row["name"])
    skills_config.save_disabled_skills(agent_config, disabled)
    atomic.fsync_dir(Path(_module("hermes_constants").get_hermes_home()))  # the writer fsyncs the file only
    _module("agent.skill_commands").reload_skills()  # the agent's slash commands follow at once
    return {**row, "enabled": enabled}


def save_skill(name: Any, content: Any, base_version: Any) -> dict[str, Any]:
    """Replace the ``SKILL.md`` of a skill the person owns, if it is still at ``base_version``."""
    row = _find(name)
    if not row["editable"]:
        raise BadRequest(
            f"{row['name']!r} comes from the agent's {row['source']} skills; only your own are edited here"
        )
    if not isinstance(content, str) or not isinstance(base_version, str):
        raise BadRequest("content must be text and base_version the version the page read")
    data = content.encode("utf-8", errors="replace")
    if len(data) > _CONTENT_MAX:
        raise BadRequest(f"A skill may hold at most {_CONTENT_MAX // 1024} KB")
    frontmatter, _body = _module("tools.skills_tool")._parse_frontmatter(content)
    if str(frontmatter.get("name") or row["name"]) != row["name"]:
        raise BadRequest("The name in the skill's front matter must stay the skill's name")
    path = _skill_file(row["name"])
    current = agent_memory.read_bytes(path)
    if agent_memory.version_of(current) != base_version:
        raise Conflict(
            f"{row['name']} changed since you opened it.",
            current={
                "content": (current or b"").decode("utf-8", errors="replace"),
                "version": agent_memory.version_of(current),
            },
            yours=content,
        )
    atomic.write_bytes_durable(path, data)
    _module("agent.skill_commands").reload_skills()  # a changed description shows in the command list
    return {**row, "content": content, "version": agent_memory.version_of(data)}


def invocation(command: Any, instruction: Any = "") -> dict[str, Any]:
    """The message a skill's slash command sends: the skill loaded with the person's instruction."""
    if not isinstance(command, str) or not command.startswith("/") or len(command) > _NAME_MAX + 1:
        raise BadRequest("command must be a slash command such as /my-skill")
    if not isinstance(instruction, str) or len(instruction) > _INSTRUCTION_MAX:
        raise BadRequest("instruction must be text")
    commands = _module("agent.skill_commands")
    key = commands.resolve_skill_command_key(command[1:])
    if key is None:
        turned_off = [
            row for row in list_skills()["skills"] if row["command"] == command and not row["enabled"]
        ]
        if turned_off:
            raise BadRequest(f"The skill {turned_off[0]['name']!r} is turned off; turn it on under Skills")
        raise NotFound(f"No skill answers {command}")
    message = commands.build_skill_invocation_message(key, instruction.strip())
    if not message:
        raise NotFound(f"The skill behind {command} could not be loaded")
    return {"command": key, "message": message}

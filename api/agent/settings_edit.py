"""The settings a person changes often, edited in the page: the same table as the command line
(``api.store.config.SETTINGS``: type, bounds, help), written under ``webui:`` in the agent's config.yaml with the
agent's own config writer, and in force at once (each is read when it is used). A setting the
environment decides stays as it is: the page says which variable holds it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from api.agent import agent_runtime
from api.rules.errors import BadRequest
from api.store import atomic, settings_table
from api.store import config as _config

EDITABLE: tuple[str, ...] = (
    "default_model",
    "agent_toolsets",
    "approval_timeout",
    "clarify_timeout",
    "default_workspace",
    "workspace_roots",
    "remote_images",
)
_TYPE_NAMES = {bool: "bool", int: "int", float: "float", str: "str"}


def _row(setting: settings_table.Setting) -> dict[str, Any]:
    return {
        "name": setting.name,
        "type": _TYPE_NAMES.get(setting.type, "str"),
        "value": _config.setting(setting.name),
        "default": setting.default,
        "help": setting.help,
        "env": setting.env,
        "locked_by": settings_table.environment_source(setting.name),
        "minimum": setting.minimum,
        "maximum": setting.maximum,
    }


def _editable() -> dict[str, settings_table.Setting]:
    return {s.name: s for s in settings_table.SETTINGS if s.name in EDITABLE}


def list_settings() -> dict[str, Any]:
    settings = _editable()
    return {"settings": [_row(settings[name]) for name in EDITABLE], "config_file": "config.yaml"}


def update_settings(changes: Any) -> dict[str, Any]:
    """Validate every change first (nothing is written when one is refused), then write them all."""
    if not isinstance(changes, dict) or not changes:
        raise BadRequest("settings must be an object of setting names and values")
    settings = _editable()
    values: dict[str, Any] = {}
    for name, raw in changes.items():
        setting = settings.get(name)
        if setting is None:
            raise BadRequest(f"{name!r} is not a setting the page changes")
        locked = settings_table.environment_source(name)
        if locked:
            raise BadRequest(f"{name} is set by {locked} in the environment, which wins over config.yaml")
        if isinstance(raw, (dict, list)):
            raise BadRequest(f"{name}: must be {_TYPE_NAMES.get(setting.type, 'text')}")
        try:
            values[name] = settings_table.coerce_setting(setting, raw)
        except settings_table.SettingError as exc:
            raise BadRequest(f"{name}: {exc}") from None
    _write(values)
    _config.SETTINGS_VALUES.update(values)
    return list_settings()


def _write(values: dict[str, Any]) -> None:
    config_module = agent_runtime.agent_module("hermes_cli.config")
    agent_config = config_module.load_config()
    section = agent_config.get("webui")
    if not isinstance(section, dict):
        section = agent_config["webui"] = {}
    section.update(values)
    config_module.save_config(agent_config)
    atomic.fsync_dir(Path(_config.HERMES_HOME))  # the agent's writer fsyncs the file, not its folder

"""The settings in force and the paths they name, and the model/provider resolution hermes-webui's names
promise here.

The table of settings is ``api.store.settings_table`` (``SETTINGS``, ``load_settings``); ``configure(values)``
installs the values it resolved.
Importing reads nothing: entry points (the CLI, the recovery CLI, the test plugin) call ``configure``;
a program that uses the paths without it gets them from the environment on first use, as hermes-webui does. Nothing else in Talaria reads ``os.environ``.

hermes-webui's store names here (``SESSION_DIR``, ``SESSION_INDEX_FILE``, ``SESSIONS``, ``LOCK``,
``_get_session_agent_lock``) belong to the store; the face ``api.config`` (``api/faces.py``) serves them.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

import yaml

from api.store.settings_table import (  # noqa: F401 (the table's names, also read as api.store.config.*)
    SETTINGS,
    Setting,
    SettingError,
    coerce_setting,
    environment_source,
    load_settings,
    settings_help,
)


def _static_dir() -> Path:
    """The page's files: ``api/static`` in an installed wheel, ``static/`` beside ``api`` in the repository."""
    package = Path(__file__).resolve().parent.parent  # api/, which holds the store's package
    installed = package / "static"
    return installed if installed.is_dir() else package.parent / "static"


STATIC_DIR = _static_dir()


class _PathFromEnvironment:
    """What a path global holds until ``configure()``: its first use configures from the environment.

    Importing reads neither the environment nor a file. A program that imports ``api.store.models`` and uses a
    session without calling ``configure`` (as hermes-webui's own code and tests do) gets the folders the
    environment names (``HERMES_HOME``, ``HERMES_WEBUI_STATE_DIR``), exactly as hermes-webui resolves them.
    """

    def __init__(self, name: str) -> None:
        self._name = name

    def __repr__(self) -> str:
        return f"<api.store.config.{self._name}: from the environment on first use>"

    def _path(self) -> Path:
        configure_from_environment()
        return cast(Path, globals()[self._name])

    def __fspath__(self) -> str:
        return os.fspath(self._path())

    def __str__(self) -> str:
        return str(self._path())

    def __truediv__(self, other: Any) -> Path:
        return cast("Path", self._path() / other)

    def __rtruediv__(self, other: Any) -> Path:
        return cast("Path", other / self._path())

    def __eq__(self, other: object) -> bool:
        return self._path() == other

    def __hash__(self) -> int:
        return hash(self._path())

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._path(), attr)


def _static_defaults() -> dict[str, Any]:
    """The defaults that need nothing from outside; the home and state folders have none before ``configure``."""
    return {s.name: s.default for s in SETTINGS if not callable(s.default)}


# The settings are the process's, not an app's: the agent finds its home only through this process's environment
# (``configure`` sets ``HERMES_HOME``), so every app of a process runs on the same settings; ``App.settings`` is
# this dict.
SETTINGS_VALUES: dict[str, Any] = _static_defaults()
HERMES_HOME: Path = cast(Path, _PathFromEnvironment("HERMES_HOME"))
STATE_DIR: Path = cast(Path, _PathFromEnvironment("STATE_DIR"))
STATE_DB_PATH: Path = cast(Path, _PathFromEnvironment("STATE_DB_PATH"))
# Whether the process's settings are taken (once, by an entry point or first use).
_CONFIGURED = threading.Event()
_CONFIGURE_LOCK = threading.RLock()  # one change of the process's settings at a time


def configure_from_environment() -> None:
    """Configure from the environment (and config.yaml) unless an entry point already called ``configure``.

    A value that does not fit falls back to its default, as a library import must not fail on it. The
    sessions folder is made as hermes-webui makes it, so the first save has somewhere to go.
    """
    if _CONFIGURED.is_set():
        return
    with _CONFIGURE_LOCK:
        if not _CONFIGURED.is_set():
            configure(load_settings(strict=False))
            try:
                sessions_folder().mkdir(parents=True, exist_ok=True)
            except OSError:
                pass  # the save that needs it names the problem


def setting(name: str) -> Any:
    if name not in SETTINGS_VALUES and any(s.name == name for s in SETTINGS):
        configure_from_environment()
    return SETTINGS_VALUES[name]


def configure(values: Mapping[str, Any]) -> None:
    """Take the settings (``load_settings(...)``) and point the paths at them; every entry point calls it.

    Safe to call again (a test, ``talaria doctor``): the same dict and the same module globals are
    updated in place. A store already built keeps its folder (``api.server.app.App`` builds one from these).
    """
    with _CONFIGURE_LOCK:
        _configure(values)


def _configure(values: Mapping[str, Any]) -> None:
    global HERMES_HOME, STATE_DIR, STATE_DB_PATH
    SETTINGS_VALUES.update(values)
    HERMES_HOME = Path(SETTINGS_VALUES["hermes_home"])
    STATE_DIR = Path(SETTINGS_VALUES["state_dir"])
    STATE_DB_PATH = HERMES_HOME / "state.db"
    # hermes-agent finds its home only through the environment (it reads HERMES_HOME when imported,
    # lazily, after this): setting it here keeps the agent on the folder Talaria was given.
    os.environ["HERMES_HOME"] = str(HERMES_HOME)
    # Checking a tool's availability (opening the tools menu, building an agent) would otherwise start a
    # pip install from a request; the agent reads this switch each time it would install.
    if not SETTINGS_VALUES.get("agent_installs"):
        os.environ["HERMES_DISABLE_LAZY_INSTALLS"] = "1"
    _CONFIGURED.set()


def sessions_folder() -> Path:
    """``<state_dir>/sessions``, where the settings put the session files."""
    configure_from_environment()
    return STATE_DIR / "sessions"


def default_workspace() -> str:
    """The configured workspace for new sessions, else the home folder (never the server's own cwd)."""
    configure_from_environment()
    return SETTINGS_VALUES["default_workspace"] or str(Path.home())


# ----------------------------------------------------------------------------------------------
# Model / provider resolution (the agent's own config.yaml decides)
# ----------------------------------------------------------------------------------------------


def _agent_config() -> dict[str, Any]:
    """The agent's config.yaml as written (read directly: the agent's loader creates folders in its home)."""
    try:
        with open(HERMES_HOME / "config.yaml", encoding="utf-8") as fh:
            data = yaml.safe_load(fh) or {}
    except (OSError, yaml.YAMLError):
        return {}
    return data if isinstance(data, dict) else {}


_CWD_SENTINELS = frozenset({"", ".", "./", "auto", "cwd"})  # the agent's spellings of "the launch folder"


def agent_terminal_cwd() -> str | None:
    """``terminal.cwd`` of the agent's config.yaml when it names an absolute folder."""
    terminal = _agent_config().get("terminal")
    raw = str(terminal.get("cwd") or "").strip() if isinstance(terminal, dict) else ""
    if raw in _CWD_SENTINELS:
        return None
    folder = Path(raw).expanduser()
    return str(folder) if folder.is_absolute() else None


def _agent_model_config() -> dict[str, Any]:
    model = _agent_config().get("model")
    if isinstance(model, str):
        return {"default": model}
    return model if isinstance(model, dict) else {}


def model_with_provider_context(model: str | None, provider: str | None) -> str:
    """Tag a model with its provider as ``@provider:model`` unless it already carries one."""
    model = model or ""
    provider = (provider or "").strip()
    if not provider or provider.lower() == "default" or model.startswith("@"):
        return model
    return f"@{provider}:{model}"


def resolve_model_provider(model: str | None) -> tuple[str, str | None, str | None]:
    """``(model, provider, base_url)`` for a session's model string, from the agent's config."""
    cfg = _agent_model_config()
    model = (model or "").strip()
    provider = None
    if model.startswith("@") and ":" in model:
        provider, model = model[1:].split(":", 1)
    cfg_provider = cfg.get("provider") if isinstance(cfg.get("provider"), str) else None
    base_url = cfg.get("base_url") if isinstance(cfg.get("base_url"), str) else None
    if not model:
        model = str(cfg.get("default") or SETTINGS_VALUES["default_model"] or "")
    if provider and cfg_provider and provider != cfg_provider:
        base_url = None
    return model, provider or cfg_provider, base_url

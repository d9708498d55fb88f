"""The settings table: each setting's name, type, default, environment variable, help and bounds
(``SETTINGS``), and how a value is taken: from flags, then the environment, then the ``webui:`` section of
``$HERMES_HOME/config.yaml``, then the default (``load_settings``), checked against the table
(``coerce_setting``). ``api.store.config`` installs the values; this module and it are the only readers of
``os.environ``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml


@dataclass(frozen=True)
class Setting:
    name: str
    type: type
    default: Any
    env: str | None
    help: str
    minimum: float | None = None  # inclusive bounds of a number
    maximum: float | None = None
    choices: tuple[str, ...] = ()  # the accepted values of a string (compared case-insensitively)


class SettingError(ValueError):
    """A setting's value is unusable; the message names where it came from and what is accepted."""


def _default_hermes_home(_values: Mapping[str, Any]) -> str:
    return str(Path("~/.hermes").expanduser())


def _default_state_dir(values: Mapping[str, Any]) -> str:
    return str(Path(values["hermes_home"]) / "webui")


SETTINGS: tuple[Setting, ...] = (
    Setting(
        "hermes_home",
        str,
        _default_hermes_home,
        "HERMES_HOME",
        "The Hermes agent's home folder (config.yaml, .env, state.db).",
    ),
    Setting(
        "state_dir",
        str,
        _default_state_dir,
        "HERMES_WEBUI_STATE_DIR",
        "Talaria's state folder; sessions live in <state_dir>/sessions.",
    ),
    Setting(
        "host",
        str,
        "127.0.0.1",
        "TALARIA_HOST",
        "Address to listen on. Anything but loopback requires a password.",
    ),
    Setting("port", int, 8787, "TALARIA_PORT", "TCP port to listen on (0 picks a free one).", 0, 65535),
    Setting(
        "default_model",
        str,
        "",
        "HERMES_WEBUI_DEFAULT_MODEL",
        "Model for new sessions; empty means the agent's configured default.",
    ),
    Setting(
        "default_workspace",
        str,
        "",
        "HERMES_WEBUI_DEFAULT_WORKSPACE",
        "Workspace folder for new sessions; empty means the agent's terminal.cwd, else the home folder.",
    ),
    Setting(
        "workspace_roots",
        str,
        "~",
        "TALARIA_WORKSPACE_ROOTS",
        "Folders (separated by the OS path separator) a session's workspace may be chosen under.",
    ),
    Setting(
        "approval_timeout",
        float,
        300.0,
        "TALARIA_APPROVAL_TIMEOUT",
        "Seconds a flagged command waits for the person's answer before it is denied.",
        1,
        86400,
    ),
    Setting(
        "clarify_timeout",
        float,
        300.0,
        "TALARIA_CLARIFY_TIMEOUT",
        "Seconds the agent's clarify question waits for an answer before the agent is told there was none.",
        1,
        86400,
    ),
    Setting(
        "sessions_cache_max",
        int,
        100,
        "HERMES_WEBUI_SESSIONS_MAX",
        "How many sessions the in-memory cache holds before evicting idle ones.",
        minimum=1,
    ),
    Setting(
        "index_flush_delay",
        float,
        0.25,
        "TALARIA_INDEX_FLUSH_DELAY",
        "Seconds a sidebar index update may wait before _index.json is rewritten (with many sessions, "
        "at least ten times as long as the last rewrite took).",
        minimum=0,
    ),
    Setting(
        "max_body_bytes",
        int,
        20 * 1024 * 1024,
        "TALARIA_MAX_BODY_BYTES",
        "Largest request body accepted (413 above).",
        minimum=1,
    ),
    Setting("server_threads", int, 32, "TALARIA_SERVER_THREADS", "Most requests served at once.", minimum=1),
    Setting(
        "max_streams",
        int,
        256,
        "TALARIA_MAX_STREAMS",
        "Most event streams (chat turns, sidebar feeds) open at once, apart from the request threads.",
    ),
    Setting(
        "max_pending_connections",
        int,
        1000,
        "TALARIA_MAX_PENDING_CONNECTIONS",
        "Most connections whose request is still arriving; past it the oldest is closed.",
    ),
    Setting(
        "request_head_timeout",
        float,
        10.0,
        "TALARIA_REQUEST_HEAD_TIMEOUT",
        "Seconds a client has to send its request line and header fields, in total.",
    ),
    Setting(
        "request_timeout",
        float,
        30.0,
        "TALARIA_REQUEST_TIMEOUT",
        "Seconds a client has to send its whole request, body included.",
    ),
    Setting(
        "response_idle_timeout",
        float,
        30.0,
        "TALARIA_RESPONSE_IDLE_TIMEOUT",
        "Seconds a client may take no byte of its response before the connection is closed.",
        minimum=0.1,
    ),
    Setting(
        "response_timeout",
        float,
        600.0,
        "TALARIA_RESPONSE_TIMEOUT",
        "Seconds a client has to receive a whole response (event streams excepted).",
        minimum=0.1,
    ),
    Setting(
        "response_memory_bytes",
        int,
        64 * 1024 * 1024,
        "TALARIA_RESPONSE_MEMORY_BYTES",
        "Bytes of responses still being sent that are kept in memory, across all clients; the rest "
        "(and any response over 1 MiB) waits in temporary files.",
        minimum=0,
    ),
    Setting(
        "response_spool_bytes",
        int,
        2 * 1024 * 1024 * 1024,
        "TALARIA_RESPONSE_SPOOL_BYTES",
        "Bytes of responses still being sent that wait in temporary files, across all clients; a "
        "response that would pass it is refused (503).",
        minimum=0,
    ),
    Setting(
        "allowed_hosts",
        str,
        "",
        "TALARIA_ALLOWED_HOSTS",
        "Extra Host names the server answers to, comma-separated (name = any port, name:port, * = any).",
    ),
    Setting(
        "checkpoint_interval",
        float,
        3.0,
        "TALARIA_CHECKPOINT_INTERVAL",
        "Seconds between checkpoints of a streaming answer.",
        minimum=0.01,
    ),
    Setting(
        "password",
        str,
        "",
        "TALARIA_PASSWORD",
        "Login password; empty disables auth (only allowed on loopback).",
    ),
    Setting(
        "secret_key",
        str,
        "",
        "TALARIA_SECRET_KEY",
        "Key that signs session cookies; empty means one is generated in the state dir.",
    ),
    Setting(
        "attachment_max_bytes",
        int,
        10 * 1024 * 1024,
        "TALARIA_ATTACHMENT_MAX_BYTES",
        "Largest attachment stored in a session's workspace, and largest workspace image shown.",
    ),
    Setting(
        "upload_max_bytes",
        int,
        10 * 1024 * 1024,
        "TALARIA_UPLOAD_MAX_BYTES",
        "Largest file uploaded into a workspace folder from the files panel (its base64 body must also "
        "fit max_body_bytes).",
        minimum=0,
    ),
    Setting(
        "folder_download_max_bytes",
        int,
        1024 * 1024 * 1024,
        "TALARIA_FOLDER_DOWNLOAD_MAX_BYTES",
        "Most bytes of files a folder downloaded as a zip may hold (413 above).",
        minimum=0,
    ),
    Setting(
        "remote_images",
        bool,
        False,
        "TALARIA_REMOTE_IMAGES",
        "Show https images that answers link to (off: they stay links, so nothing loads without a click).",
    ),
    Setting(
        "models_cache_seconds",
        float,
        300.0,
        "TALARIA_MODELS_CACHE_SECONDS",
        "How long the model picker's list (live /v1/models of custom endpoints) is reused before a refetch.",
    ),
    Setting(
        "agent_toolsets",
        str,
        "",
        "TALARIA_AGENT_TOOLSETS",
        "Comma-separated agent toolsets: what a session starts with and the most it may switch on; "
        "empty means the agent's defaults and no limit, 'none' means no tools at all.",
    ),
    Setting(
        "agent_installs",
        bool,
        False,
        "TALARIA_AGENT_INSTALLS",
        "Let the agent pip-install a tool's missing package into Talaria's environment when the tool is "
        "checked or used (its lazy installs); off, such a tool is unavailable until installed (`hermes tools`).",
    ),
    Setting(
        "warm_up",
        bool,
        True,
        "TALARIA_WARM_UP",
        "Import the agent and build the most recent session's agent in the background at start.",
    ),
    Setting(
        "agent_workers",
        int,
        2,
        "TALARIA_AGENT_WORKERS",
        "Worker processes the agent's turns run in (at a lower CPU priority, apart from the server's "
        "requests; each runs many turns at once, and a second is started only while the first is busy); "
        "0 runs them as threads of the server, for debugging.",
        0,
        64,
    ),
    Setting(
        "worker_deadline",
        float,
        60.0,
        "TALARIA_WORKER_DEADLINE",
        "Seconds an agent worker may say nothing (no event, no heartbeat) before it is killed; its turns "
        "end as interrupted.",
        1,
        3600,
    ),
    Setting(
        "token_batch_interval",
        float,
        0.02,
        "TALARIA_TOKEN_BATCH_INTERVAL",
        "Seconds an agent worker gathers a turn's streamed tokens into one event before it sends them (the "
        "first token after a pause goes at once); 0 sends every token alone.",
        0,
        1,
    ),
    Setting(
        "worker_max_turns",
        int,
        200,
        "TALARIA_WORKER_MAX_TURNS",
        "Turns an agent worker runs before a fresh one takes its place (its memory does not grow).",
        1,
        1_000_000,
    ),
    Setting(
        "worker_idle_seconds",
        float,
        900.0,
        "TALARIA_WORKER_IDLE_SECONDS",
        "Seconds an agent worker that has run a turn may sit idle before a fresh one takes its place.",
        1,
        86_400,
    ),
    Setting(
        "cron_scheduler",
        bool,
        True,
        "TALARIA_CRON_SCHEDULER",
        "Run the agent's cron scheduler while Talaria runs, so its jobs fire without the agent's gateway; "
        "the agent's lock lets only one process fire each job when the gateway runs too.",
    ),
    Setting(
        "cron_tick_seconds",
        int,
        60,
        "TALARIA_CRON_TICK_SECONDS",
        "Seconds between the cron scheduler's checks for due jobs.",
        1,
        3600,
    ),
    Setting(
        "log_level",
        str,
        "INFO",
        "TALARIA_LOG_LEVEL",
        "Talaria's log level; the agent's own INFO lines show only at DEBUG.",
        choices=("DEBUG", "INFO", "WARNING", "ERROR"),
    ),
)


_TYPE_NAMES = {int: "an integer", float: "a number", str: "text", bool: "true or false"}


def coerce_setting(setting: Setting, raw: Any) -> Any:
    """``raw`` as the setting's type within its bounds; ``SettingError`` says what is accepted."""
    if setting.type is bool:
        return str(raw).strip().lower() in {"1", "true", "yes", "on"}
    try:
        if setting.type is int and isinstance(raw, float) and not raw.is_integer():
            raise ValueError(raw)
        value = setting.type(raw.strip() if isinstance(raw, str) else raw)
    except (TypeError, ValueError):
        raise SettingError(f"must be {_TYPE_NAMES.get(setting.type, setting.type.__name__)}") from None
    if setting.choices:
        value = str(value).upper()
        if value not in setting.choices:
            raise SettingError(f"must be one of {', '.join(setting.choices)}")
    low, high = setting.minimum, setting.maximum
    if (low is not None and value < low) or (high is not None and value > high):
        bounds = f"between {low:g} and {high:g}" if low is not None and high is not None else ""
        bounds = bounds or (f"at least {low:g}" if low is not None else f"at most {high:g}")
        raise SettingError(f"must be {bounds}")
    return value


def _read_yaml_section(hermes_home: str) -> dict[str, Any]:
    try:
        with open(Path(hermes_home) / "config.yaml", encoding="utf-8") as fh:
            data = yaml.safe_load(fh) or {}
    except (OSError, yaml.YAMLError):
        return {}
    section = data.get("webui") if isinstance(data, dict) else None
    return section if isinstance(section, dict) else {}


def _raw_value(
    setting: Setting,
    overrides: Mapping[str, Any],
    environ: Mapping[str, str],
    yaml_section: Callable[[], dict[str, Any]],
) -> tuple[Any, str] | None:
    """The value that decides ``setting`` and where it came from (for error messages); None: the default."""
    if setting.name in overrides:
        raw = overrides[setting.name]
        return raw, f"--{setting.name.replace('_', '-')} {raw}"
    raw = environ.get(setting.env) if setting.env else None
    if raw not in (None, ""):
        return raw, f"{setting.env}={raw!r}"
    if setting.name != "hermes_home" and setting.name in yaml_section():
        raw = yaml_section()[setting.name]
        return raw, f"webui.{setting.name}: {raw!r} in config.yaml"
    return None


def load_settings(
    environ: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
    *,
    strict: bool = True,
) -> dict[str, Any]:
    """Resolve every setting: explicit overrides, then environment, then config.yaml, then default.

    A value that does not fit raises ``SettingError`` naming its source (``--port 99999: must be
    between 0 and 65535``); with ``strict=False`` it falls back to the default instead.
    """
    environ = os.environ if environ is None else environ
    overrides = {k: v for k, v in (overrides or {}).items() if v is not None}
    values: dict[str, Any] = {}
    cached_section: list[dict[str, Any]] = []

    def yaml_section() -> dict[str, Any]:
        if not cached_section:
            cached_section.append(_read_yaml_section(values["hermes_home"]))
        return cached_section[0]

    for setting in SETTINGS:
        found = _raw_value(setting, overrides, environ, yaml_section)
        if found is not None:
            raw, source = found
            try:
                values[setting.name] = coerce_setting(setting, raw)
                continue
            except SettingError as exc:
                if strict:
                    raise SettingError(f"{source}: {exc}") from None
        default = setting.default
        values[setting.name] = default(values) if callable(default) else default
    values["hermes_home"] = str(Path(values["hermes_home"]).expanduser().resolve())
    values["state_dir"] = str(Path(values["state_dir"]).expanduser().resolve())
    return values


def settings_help() -> str:
    """Each setting's environment variable and ``config.yaml`` key, then its help and default."""

    def names(setting: Setting) -> str:
        # The agent's home holds config.yaml, so it can only come from the environment (or a flag).
        key = "" if setting.name == "hermes_home" else f"  |  webui.{setting.name}"
        return f"{setting.env or '-'}{key}"

    return "\n".join(
        f"  {names(s)}\n      {s.help} (default: {s.default if not callable(s.default) else 'derived'})"
        for s in SETTINGS
    )


def environment_source(name: str) -> str | None:
    """The environment variable that decides setting ``name`` (it wins over config.yaml), or None."""
    found = next((s for s in SETTINGS if s.name == name), None)
    if found is None or not found.env:
        return None
    return found.env if os.environ.get(found.env) not in (None, "") else None

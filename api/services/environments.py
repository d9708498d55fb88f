"""Named execution environments: where a session's terminal and file tools run.

A person names environments under ``webui: environments: <name>:`` in the agent's config.yaml, each written
with the agent's own ``terminal.*`` keys (``backend: ssh`` with ``ssh_host``/``ssh_user``/``ssh_port``/
``ssh_key``; ``backend: docker`` with ``docker_image``; ``modal``, ``daytona``, ``singularity`` with their
``*_image``); ``local`` always exists and cannot be changed. The agent's remote backends copy the person's
credential files and skills to the other side, so a remote environment is used (tested, or chosen for a
session) only after the person confirmed it once; the confirmation names the target it was given for
(``webui: environments_confirmed: <name>: <target>``), so pointing the name at another host asks again.

A session's choice is its ``environment`` field (absent: ``local``). Its turns run in that environment only:
the agent picks its backend once per process, so a non-local turn runs in a worker process configured for
that environment alone (``api.services.environment_workers``). Its workspace is a folder on that host
(``environment_workspace``, checked there by ``api.services.environment_check``; absent: the backend's own start
folder), and the local folder in ``workspace`` is never used for it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from api.agent import agent_runtime
from api.rules.errors import BadRequest, Conflict, NotFound
from api.services import environment_workers
from api.store import atomic, models
from api.store import config as _config
from api.store.session_edit import edit

LOCAL = "local"
# The agent's terminal keys each backend reads (tools/terminal_tool.py, _get_env_config).
BACKEND_KEYS: dict[str, tuple[str, ...]] = {
    "local": (),
    "ssh": ("ssh_host", "ssh_user", "ssh_port", "ssh_key"),
    "docker": ("docker_image",),
    "modal": ("modal_image",),
    "daytona": ("daytona_image",),
    "singularity": ("singularity_image",),
}
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,39}")
# A host, user or image reaches the ssh/docker command line as one argument: no option, no space.
_WORD = re.compile(r"[A-Za-z0-9_.@:/\[\]%+=~-]{1,255}")
_USER = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}")


def _agent_config() -> tuple[Any, dict[str, Any]]:
    config_module = agent_runtime.agent_module("hermes_cli.config")
    return config_module, config_module.load_config()


def _webui(config: dict[str, Any]) -> dict[str, Any]:
    section = config.get("webui")
    return section if isinstance(section, dict) else {}


def _defined(config: dict[str, Any]) -> dict[str, dict[str, Any]]:
    found = _webui(config).get("environments")
    if not isinstance(found, dict):
        return {}
    return {
        str(name): dict(entry) for name, entry in found.items() if isinstance(entry, dict) and name != LOCAL
    }


def _confirmed(config: dict[str, Any]) -> dict[str, str]:
    found = _webui(config).get("environments_confirmed")
    return {str(k): str(v) for k, v in found.items()} if isinstance(found, dict) else {}


def target_of(entry: dict[str, Any]) -> str:
    """Where an environment's commands land, in words: ``user@host:port``, ``docker:image``, ``local``."""
    backend = entry.get("backend", LOCAL)
    if backend == "ssh":
        return f"{entry.get('ssh_user')}@{entry.get('ssh_host')}:{entry.get('ssh_port', 22)}"
    if backend == LOCAL:
        return LOCAL
    return f"{backend}:{entry.get(f'{backend}_image') or 'default image'}"


def _row(name: str, entry: dict[str, Any], confirmed: dict[str, str]) -> dict[str, Any]:
    if name != LOCAL:
        try:
            entry = _checked(name, entry)
        except BadRequest as exc:
            return {"name": name, "backend": str(entry.get("backend")), "target": "", "remote": True,
                    "confirmed": False, "error": exc.message}  # fmt: skip
    backend = entry.get("backend", LOCAL)
    row: dict[str, Any] = {
        "name": name,
        "backend": backend,
        "target": target_of(entry),
        "remote": backend != LOCAL,
    }
    for key in BACKEND_KEYS.get(backend, ()):
        if key in entry:
            row[key] = entry[key]  # ssh_key is the key file's path; its contents are never read here
    row["confirmed"] = backend == LOCAL or confirmed.get(name) == row["target"]
    return row


def definition(name: Any) -> dict[str, Any]:
    """The environment ``name`` as the agent's terminal keys (``{"backend": "local"}`` for local)."""
    if name in (None, "", LOCAL):
        return {"backend": LOCAL}
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise BadRequest("environment must be the name of an environment")
    _, config = _agent_config()
    entry = _defined(config).get(name)
    if entry is None:
        raise NotFound(f"There is no environment named {name!r}; define it in Environments first.")
    return _checked(name, entry)


def _checked(name: str, entry: dict[str, Any]) -> dict[str, Any]:
    """A definition as written by hand goes through the page's checks too: nothing option-like reaches ssh."""
    try:
        return clean_definition(entry)
    except BadRequest as exc:
        raise BadRequest(f"The environment {name!r} in config.yaml is not usable: {exc.message}") from None


def list_environments() -> dict[str, Any]:
    _, config = _agent_config()
    confirmed = _confirmed(config)
    rows = [_row(LOCAL, {"backend": LOCAL}, confirmed)]
    rows += [_row(name, entry, confirmed) for name, entry in sorted(_defined(config).items())]
    return {"environments": rows, "backends": list(BACKEND_KEYS)}


def is_confirmed(name: str) -> bool:
    entry = definition(name)
    if entry.get("backend", LOCAL) == LOCAL:
        return True
    _, config = _agent_config()
    return _confirmed(config).get(name) == target_of(entry)


# ---------------------------------------------------------------------- checking a definition


def _text(body: dict[str, Any], key: str, pattern: re.Pattern[str], what: str) -> str:
    value = body.get(key)
    if not isinstance(value, str) or not pattern.fullmatch(value.strip()) or value.strip().startswith("-"):
        raise BadRequest(f"{key}: {what}")
    return value.strip()


def clean_definition(body: dict[str, Any]) -> dict[str, Any]:
    """The agent's terminal keys for one environment from the page's form; a 400 names the bad field."""
    backend = body.get("backend")
    if backend == LOCAL or backend not in BACKEND_KEYS:
        raise BadRequest(f"backend must be one of {', '.join(k for k in BACKEND_KEYS if k != LOCAL)}")
    entry: dict[str, Any] = {"backend": backend}
    if backend == "ssh":
        entry["ssh_host"] = _text(body, "ssh_host", _WORD, "a host name or address")
        entry["ssh_user"] = _text(body, "ssh_user", _USER, "a user name")
        port = body.get("ssh_port", 22)
        if isinstance(port, str) and port.strip().isdigit():
            port = int(port.strip())
        if not isinstance(port, int) or isinstance(port, bool) or not 1 <= port <= 65535:
            raise BadRequest("ssh_port: a port number between 1 and 65535")
        entry["ssh_port"] = port
        key = body.get("ssh_key", "")
        if not isinstance(key, str) or "\n" in key or "\x00" in key or key.strip().startswith("-"):
            raise BadRequest("ssh_key: the path of a private key file, or empty for the user's default keys")
        if key.strip():
            entry["ssh_key"] = key.strip()
    else:
        image = body.get(f"{backend}_image", "")
        if image not in ("", None):
            entry[f"{backend}_image"] = _text(body, f"{backend}_image", _WORD, "an image name")
    return entry


# ---------------------------------------------------------------------- writing config.yaml


def _save(name: str, changes: dict[str, Any]) -> None:
    """Set (or with None remove) ``name`` in each named table under ``webui:`` of the agent's config, and
    write it with the agent's own writer."""
    config_module, config = _agent_config()
    section = config.get("webui")
    if not isinstance(section, dict):
        section = config["webui"] = {}
    for key, value in changes.items():
        table = section.get(key)
        if not isinstance(table, dict):
            table = section[key] = {}
        if value is None:
            table.pop(name, None)
        else:
            table[name] = value
    config_module.save_config(config)
    atomic.fsync_dir(Path(_config.HERMES_HOME))  # the agent's writer fsyncs the file, not its folder


def _name(value: Any) -> str:
    if not isinstance(value, str) or not _NAME.fullmatch(value):
        raise BadRequest("name: letters, digits, '-' and '_', up to 40, starting with a letter or digit")
    if value == LOCAL:
        raise BadRequest("local is always there and cannot be changed")
    return value


def update(body: Any, pools: environment_workers.EnvironmentPools | None = None) -> dict[str, Any]:
    """Create, edit (``{name, backend, ...}``) or delete (``{name, delete: true}``) one environment; its workers
    among ``pools`` (the app's; those in use when None) stop."""
    if not isinstance(body, dict):
        raise BadRequest("body must be an object")
    name = _name(body.get("name"))
    if body.get("delete") is True:
        _, config = _agent_config()
        if name not in _defined(config):
            raise NotFound(f"There is no environment named {name!r}.")
        _save(name, {"environments": None, "environments_confirmed": None})
        environment_workers.forget(name, pools)
        return list_environments()
    _save(name, {"environments": clean_definition(body)})
    environment_workers.forget(name, pools)  # its workers were set up for the old definition
    return list_environments()


def confirm(name: Any) -> dict[str, Any]:
    """Remember that the person accepted what the agent copies to ``name``'s target."""
    if name == LOCAL:
        return list_environments()
    name = _name(name)
    _save(name, {"environments_confirmed": target_of(definition(name))})
    return list_environments()


def require_confirmed(name: str) -> None:
    if not is_confirmed(name):
        target = target_of(definition(name))
        raise Conflict(
            f"Confirm first what the agent copies to {target} (environment {name!r}).",
            needs_confirmation=name,
        )


# ---------------------------------------------------------------------- sessions


def of_session(session: Any) -> str:
    return getattr(session, "environment", None) or LOCAL


def set_for_session(
    sid: str,
    name: Any,
    start_there: Callable[[str, dict[str, Any]], str | None] | None = None,
    *,
    store: models.Store | None = None,
) -> dict[str, Any]:
    """Point a session's turns at another environment (a remote one once its copies are confirmed).

    ``start_there(name, definition)`` answers the absolute folder the session starts in on that side (the
    agent's file tools would read a bare ``~`` as this machine's home), or None for the backend's own."""
    if name in (None, ""):
        raise BadRequest("environment must be the name of an environment")
    entry = definition(name)
    folder = None
    if name != LOCAL:
        require_confirmed(name)
        folder = start_there(name, entry) if start_there is not None else None
    with edit(sid, touch_updated_at=False, store=store) as session:
        if session.read_only:
            raise Conflict("This session is read-only.")
        if (session.environment or LOCAL) != name:
            session.environment_workspace = folder  # a folder of the other host means nothing on this one
        session.environment = None if name == LOCAL else name
    # The row names ``local`` too, so a page merging it into its copy forgets the previous environment.
    return {**session.compact(), "environment": name, "environment_workspace": session.environment_workspace}


def start_folder(entry: dict[str, Any]) -> str:
    """Where the agent's backend starts when a remote session names no folder: the login's home over SSH,
    the container's ``/root`` elsewhere (the agent's own defaults)."""
    return "~" if entry.get("backend") == "ssh" else "/root"


def for_turn(session: Any) -> tuple[str, dict[str, Any]] | None:
    """Where a turn of this session runs: None for ``local``, else ``(name, definition)``; a turn in an
    environment that is gone, unusable or not confirmed is refused before anything is saved."""
    name = of_session(session)
    if name == LOCAL:
        return None
    entry = definition(name)
    require_confirmed(name)
    return name, entry


def turn_workspace(session: Any, entry: dict[str, Any] | None) -> str | None:
    """The folder on the environment's side a remote turn runs in (None for a local session)."""
    if entry is None:
        return None
    folder = getattr(session, "environment_workspace", None)
    return folder if isinstance(folder, str) and folder else start_folder(entry)

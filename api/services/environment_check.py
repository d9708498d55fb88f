"""Reaching an environment through the agent's own backend classes: what the agent copies there (for the
person's confirmation) and "Test connection" (a harmless command, answered with host name, working folder
and time, or with what failed and what to fix).

The test builds the environment as a turn's terminal tool does (``tools.terminal_tool._create_environment``),
so what it reports is what a turn meets; it is torn down at once, its SSH master connection included.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from api.agent import agent_runtime
from api.agent.agent_events import OnEvent
from api.rules import remote_output
from api.rules.errors import ApiError, BadRequest, redact_paths
from api.services import environments
from api.store import config as _config
from api.store import models
from api.store.in_use import InUse

log = logging.getLogger("talaria.environments")

TEST_TIMEOUT_S = 20
_PROBE = 'printf \'%s\\n%s\\n\' "$(hostname)" "$(pwd)"'


def copies(name: Any) -> dict[str, Any]:
    """What the agent copies to the environment before its first command (its file sync)."""
    entry = environments.definition(name)
    backend = entry.get("backend", environments.LOCAL)
    if backend == environments.LOCAL:
        return {"name": environments.LOCAL, "remote": False, "target": environments.LOCAL}
    credential_files = agent_runtime.agent_module("tools.credential_files")
    home = Path(_config.HERMES_HOME)

    def shown(path: str) -> str:
        try:
            return str(Path(path).relative_to(home))
        except ValueError:
            return Path(path).name

    credentials = [shown(m["host_path"]) for m in credential_files.get_credential_file_mounts()]
    skills = len(credential_files.iter_skills_files(container_base="~/.hermes"))
    cache = len(credential_files.iter_cache_files(container_base="~/.hermes"))
    return {
        "name": name,
        "remote": True,
        "backend": backend,
        "target": environments.target_of(entry),
        "credential_files": credentials,
        "skill_files": skills,
        "cache_files": cache,
        "destination": "~/.hermes on the other side",
    }


def _fix_for(backend: str, entry: dict[str, Any], message: str) -> str:
    lowered = message.lower()
    if backend == "ssh":
        where = f"{entry.get('ssh_user')}@{entry.get('ssh_host')} port {entry.get('ssh_port', 22)}"
        if "permission denied" in lowered:
            return f"{where} refused the key: add the public key of the key file to that user's ~/.ssh/authorized_keys, or set ssh_key to a key it accepts."
        if "connection refused" in lowered or "timed out" in lowered or "no route" in lowered:
            return f"Nothing answered SSH at {where}: check that the host is up, sshd runs, and the port is right."
        if "could not resolve" in lowered or "name or service not known" in lowered:
            return f"The host name {entry.get('ssh_host')!r} does not resolve: check ssh_host."
        if "host key verification failed" in lowered or "identification has changed" in lowered:
            return f"{where} presents another host key than the one known: check the host, then update known_hosts."
        return f"Check {where} and its ssh_key."
    if backend == "docker":
        return "Start the Docker daemon (or give this user access to it), and check docker_image."
    if backend == "modal":
        return "Set up Modal credentials (`modal token new`) for the user running Talaria."
    if backend == "daytona":
        return "Set DAYTONA_API_KEY in the agent's .env (and install the daytona package)."
    if backend == "singularity":
        return "Install Apptainer or Singularity on this machine."
    return ""


def _build(entry: dict[str, Any]) -> Any:
    terminal_tool = agent_runtime.agent_module("tools.terminal_tool")
    backend = entry.get("backend", environments.LOCAL)
    ssh_config = {
        "host": entry.get("ssh_host", ""),
        "user": entry.get("ssh_user", ""),
        "port": int(entry.get("ssh_port", 22)),
        "key": str(Path(entry["ssh_key"]).expanduser()) if entry.get("ssh_key") else "",
    }
    image = entry.get(f"{backend}_image") or terminal_tool._get_env_config().get(f"{backend}_image", "")
    cwd = {"ssh": "~", environments.LOCAL: _config.default_workspace()}.get(backend, "/root")
    return terminal_tool._create_environment(
        backend,
        image,
        cwd,
        TEST_TIMEOUT_S,
        ssh_config=ssh_config,
        container_config={},
        task_id=f"talaria-test-{backend}",
    )


def _run_there(entry: dict[str, Any], command: str) -> dict[str, Any]:
    """Run one command through the agent's backend for ``entry`` and tear it down: its result dict."""
    env = _build(entry)
    try:
        return dict(env.execute(command, timeout=TEST_TIMEOUT_S))
    finally:
        try:
            env.cleanup()
        except Exception:  # noqa: BLE001 - a teardown failure does not change the answer
            log.warning("cleanup after a command in an environment failed", exc_info=True)


def remote_folder(name: str, value: Any) -> str:
    """The folder ``value`` on the environment's side, checked there (it exists and is a folder) and
    answered as that side resolves it; ``BadRequest`` says what is wrong, on which host."""
    entry = environments.definition(name)
    environments.require_confirmed(name)
    target = environments.target_of(entry)
    command = f"cd -- {remote_output.remote_path(value)} && pwd -P"
    try:
        result = _run_there(entry, command)
    except Exception as exc:  # noqa: BLE001 - the backend's failure is the person's answer
        message = str(exc).strip() or type(exc).__name__
        raise BadRequest(
            f"{target} could not be reached to check the folder: {redact_paths(message)[:300]}. "
            f"{_fix_for(str(entry.get('backend')), entry, message)}"
        ) from None
    lines = str(result.get("output", "")).strip().splitlines()
    if result.get("returncode") != 0 or not lines or not lines[-1].startswith("/"):
        raise BadRequest(f"workspace is not a folder on {target}: {' '.join(lines)[:300]}")
    return lines[-1]


def _start_folder(name: str, entry: dict[str, Any]) -> str | None:
    """An SSH login's home, asked there; a container starts in its backend's own folder."""
    return remote_folder(name, "~") if entry.get("backend") == "ssh" else None


def set_for_session(sid: str, name: Any, *, store: models.Store | None = None) -> dict[str, Any]:
    """Choose a session's environment (of ``store``, the caller's app's); over SSH its start folder is the
    login's home, checked there now."""
    return environments.set_for_session(sid, name, _start_folder, store=store)


def test_connection(name: Any) -> dict[str, Any]:
    """Run a harmless command in ``name``: ``{ok: true, host, cwd, elapsed_ms}`` or ``{ok: false, error,
    fix}`` (a failed test is an answer, not an error)."""
    entry = environments.definition(name)
    backend = entry.get("backend", environments.LOCAL)
    if backend != environments.LOCAL:
        environments.require_confirmed(str(name))
    started = time.monotonic()
    env = None
    try:
        env = _build(entry)
        result = env.execute(_PROBE, timeout=TEST_TIMEOUT_S)
        output = str(result.get("output", "")).strip().splitlines()
        if result.get("returncode") != 0 or len(output) < 2:
            raise RuntimeError(
                f"the test command failed (exit {result.get('returncode')}): {' '.join(output)[:300]}"
            )
        answer = {"ok": True, "host": output[-2], "cwd": output[-1]}
    except Exception as exc:  # noqa: BLE001 - every backend failure is reported to the person, not raised
        message = str(exc).strip() or type(exc).__name__
        log.info("environment %s: test failed: %s", name, message)
        answer = {"ok": False, "error": redact_paths(message)[:600], "fix": _fix_for(backend, entry, message)}
    finally:
        if env is not None:
            try:
                env.cleanup()
            except Exception:  # noqa: BLE001 - a teardown failure does not change the test's answer
                log.warning("environment %s: cleanup after the test failed", name, exc_info=True)
    answer.update(
        {
            "name": name or environments.LOCAL,
            "backend": backend,
            "target": environments.target_of(entry),
            "elapsed_ms": round((time.monotonic() - started) * 1000),
        }
    )
    return answer


# ---------------------------------------------------------------------- a turn's reach


def unreachable(name: str, entry: dict[str, Any], message: str) -> str:
    """What a person reads when ``name`` could not be reached: the backend's words and what to fix."""
    backend = str(entry.get("backend"))
    return (
        f"The environment {name!r} ({environments.target_of(entry)}) could not be reached: "
        f"{redact_paths(message.strip() or 'no answer')[:300]}. {_fix_for(backend, entry, message)}"
    )


def _cannot_reach(name: str, entry: dict[str, Any], message: str) -> str:
    return f"{unreachable(name, entry, message)} Your message is kept; send it again once that is fixed."


REACHED_FRESH_S = 60.0  # a host that answered this recently is not asked again before a turn


class Reached:
    """When each environment last answered (its definition as text → a monotonic time). The app owns one
    (``App.reached``), put in use."""

    def __init__(self) -> None:
        self._at: dict[str, float] = {}
        self._lock = threading.Lock()

    def fresh(self, key: str) -> bool:
        with self._lock:
            return time.monotonic() - self._at.get(key, float("-inf")) < REACHED_FRESH_S

    def note(self, key: str, answered: bool) -> None:
        with self._lock:
            if answered:
                self._at[key] = time.monotonic()
            else:
                self._at.pop(key, None)


REACHED: InUse[Reached] = InUse(Reached)  # the app's (``App.reached``), else built on first use


def _key(entry: dict[str, Any]) -> str:
    return json.dumps(entry, sort_keys=True)


def reach(name: str, entry: dict[str, Any], *, reached: Reached | None = None) -> None:
    """Before a turn there: a harmless command through the agent's backend, so an unreachable host, a
    refused key or a missing daemon ends the turn at once with what to fix (``ApiError`` 502). A host that
    answered within ``REACHED_FRESH_S`` is not asked again: a drop since then shows in the turn's first
    command, which ``ConnectionWatch`` turns into the same error. ``reached``: the app's record of answers (the
    one in use when None)."""
    reached = REACHED.get(reached)
    if reached.fresh(_key(entry)):
        return
    try:
        result = _run_there(entry, "true")
        failed = "" if result.get("returncode") == 0 else str(result.get("output") or "")
        failed = failed or ("" if result.get("returncode") == 0 else f"exit {result.get('returncode')}")
    except Exception as exc:  # noqa: BLE001 - every backend failure is the turn's answer
        failed = str(exc).strip() or type(exc).__name__
    reached.note(_key(entry), answered=not failed)
    if failed:
        log.info("environment %s: not reachable before a turn: %s", name, failed)
        raise ApiError(_cannot_reach(name, entry, failed), status=502)


def _unreached(entry: dict[str, Any], reached: Reached | None) -> None:
    REACHED.get(reached).note(_key(entry), answered=False)


_SSH_FAILED = 255  # what ssh itself exits with when the connection fails or drops


def _exit_code(result: Any) -> Any:
    try:
        found = json.loads(result) if isinstance(result, str) else None
    except ValueError:
        return None
    return found.get("exit_code") if isinstance(found, dict) else None


class ConnectionWatch:
    """A turn's event sink that notices a command ending as a dropped SSH connection ends (exit 255), asks
    the host again, and when it does not answer stops the turn with what to fix (``lost``)."""

    def __init__(
        self, name: str, entry: dict[str, Any], on_event: OnEvent, *, reached: Reached | None = None
    ) -> None:
        self.name = name
        self.reached = reached  # the app's record of answers (None: the one in use)
        self.entry = entry
        self.on_event = on_event
        self.interrupt: Callable[[str], None] | None = None  # the turn's, once it runs
        self.reset: Callable[[], object] | None = None  # drops the worker's connection there, once it runs
        self.lost: str | None = None
        self._checks: list[threading.Thread] = []

    def __call__(self, event: str, data: dict[str, Any]) -> None:
        self.on_event(event, data)
        if (
            event == "tool_complete"
            and self.entry.get("backend") == "ssh"
            and _exit_code(data.get("result")) == _SSH_FAILED
            and self.lost is None
        ):
            check = threading.Thread(target=self._check, name="environment-reach", daemon=True)
            self._checks.append(check)
            check.start()

    def _check(self) -> None:
        _unreached(self.entry, self.reached)  # ask the host now, whenever it last answered
        try:
            reach(self.name, self.entry, reached=self.reached)
        except ApiError as exc:
            self.lost = exc.message
            if self.interrupt is not None:
                self.interrupt(exc.message)
            if self.reset is not None:  # a dead connection kept there would fail the first command after
                self.reset()

    def verdict(self) -> str | None:
        """After the turn: the text it ends with when its host was lost (None when it was not)."""
        for check in self._checks:
            check.join(TEST_TIMEOUT_S * 2)
        return self.lost

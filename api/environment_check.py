"""Reaching an environment through the agent's own backend classes: what the agent copies there (for the
person's confirmation) and "Test connection" (a harmless command, answered with host name, working folder
and time, or with what failed and what to fix).

The test builds the environment as a turn's terminal tool does (``tools.terminal_tool._create_environment``),
so what it reports is what a turn meets; it is torn down at once, its SSH master connection included.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

from api import agent_runtime, environments
from api import config as _config
from api.errors import redact_paths

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

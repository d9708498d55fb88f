"""``talaria doctor``: check the set-up a server would start with, each problem with its fix.

Checks, in order: the agent's ``config.yaml`` (readable YAML), Talaria's state dir (writable, not held
by a running Talaria), the agent's ``state.db`` (readable, opened read-only), the model (configured,
reachable, the key accepted, the model offered). Nothing is written except a probe file in the state dir, removed at once.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from api.agent import provider_errors
from api.agent.endpoint_probe import ProbeResult
from api.store import config, state_db, state_lock

OK, WARN, FAIL = "ok", "warn", "FAIL"


@dataclass(frozen=True)
class Check:
    name: str
    status: str  # OK, WARN or FAIL
    detail: str
    fix: str = ""


def check_config_file(hermes_home: Path) -> Check:
    path = hermes_home / "config.yaml"
    if not path.exists():
        return Check("config", WARN, f"{path} does not exist yet (the model check says what to write)")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        return Check("config", FAIL, f"{path} cannot be read: {exc}", "Check the file's permissions.")
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        line = f" (line {where.line + 1})" if where is not None else ""
        return Check("config", FAIL, f"{path} is not valid YAML{line}", "Fix the YAML, or write it anew with "
                     f"`{provider_errors.hermes_command()} setup`.")  # fmt: skip
    if data is not None and not isinstance(data, dict):
        return Check(
            "config", FAIL, f"{path} is not a mapping of settings", "Rewrite it as `key: value` lines."
        )
    return Check("config", OK, str(path))


def _nearest_existing(path: Path) -> Path:
    while not path.exists() and path.parent != path:
        path = path.parent
    return path


def check_state_dir(state_dir: Path) -> Check:
    fix = (
        f"Make {state_dir} writable by this user, or choose another folder with HERMES_WEBUI_STATE_DIR "
        "(or `webui.state_dir` in config.yaml)."
    )
    if not state_dir.exists():
        parent = _nearest_existing(state_dir.parent)
        if parent.is_dir() and os.access(parent, os.W_OK | os.X_OK):
            return Check("state dir", OK, f"{state_dir} (created at the first start)")
        return Check("state dir", FAIL, f"{state_dir} cannot be created ({parent} is not writable)", fix)
    if not state_dir.is_dir():
        return Check("state dir", FAIL, f"{state_dir} is not a folder", fix)
    busy = state_lock.holder(state_dir)
    if busy is not None:
        return Check(
            "state dir",
            FAIL,
            f"{state_dir} is in use by {busy}",
            "Only one Talaria serves a state dir: use the running one, stop it, or give this one another "
            "state dir (HERMES_WEBUI_STATE_DIR).",
        )
    for folder in (state_dir, state_dir / "sessions"):
        if not folder.exists():
            continue
        try:
            with tempfile.NamedTemporaryFile(dir=folder, prefix=".doctor-"):
                pass
        except OSError as exc:
            return Check("state dir", FAIL, f"{folder} is not writable: {exc.strerror or exc}", fix)
    return Check("state dir", OK, str(state_dir))


def check_state_db(path: Path) -> Check:
    if not path.exists():
        return Check("state.db", OK, f"{path} not created yet (the agent creates it at its first turn)")
    try:
        count = state_db.count_sessions(path)
    except Exception as exc:  # noqa: BLE001 - any failure to read is the finding
        return Check(
            "state.db",
            FAIL,
            f"{path} cannot be read: {exc}",
            f"The file is the agent's: check its permissions, or run `{provider_errors.hermes_command()} "
            "doctor`. Talaria only reads it and treats an unreadable one as absent.",
        )
    return Check("state.db", OK, f"{path} ({count} agent sessions)")


def _model_fix(hermes_home: Path) -> str:
    return (
        f"Open Talaria's page and use its setup form, run `{provider_errors.hermes_command()} setup`, or add "
        f"a `model:` section to {hermes_home / 'config.yaml'} (the README shows one for a local endpoint)."
    )


def check_model(
    hermes_home: Path,
    resolve: Callable[[str, str | None], dict[str, Any]],
    probe: Callable[[provider_errors.Endpoint], ProbeResult] = provider_errors.probe_endpoint,
) -> Check:
    model, provider, _base_url = config.resolve_model_provider(None)
    if not model:
        return Check("model", FAIL, "no model is configured", _model_fix(hermes_home))
    try:
        runtime = resolve(model, provider)
    except Exception as exc:  # noqa: BLE001 - the agent's resolution failure is the finding
        detail = str(getattr(exc, "message", "") or exc).splitlines()[0]
        return Check("model", FAIL, f"{model}: {detail}", _model_fix(hermes_home))
    base_url = str(runtime.get("base_url") or "")
    if not base_url:
        return Check("model", OK, f"{model} via {runtime.get('provider')} (not an HTTP endpoint; not probed)")
    endpoint = provider_errors.Endpoint(base_url, model, runtime.get("api_key") or None)
    found = probe(endpoint)
    if found.kind in ("refused", "unreachable", "auth"):
        return Check(
            "model",
            FAIL,
            f"{model} at {base_url}: {found.message}",
            provider_errors.advice(found.kind, endpoint, found),
        )
    if found.kind == "ok" and found.models and model not in found.models:
        return Check(
            "model",
            FAIL,
            f"{model} is not offered by {base_url}",
            provider_errors.advice("unknown_model", endpoint, found),
        )
    listed = "" if found.kind == "ok" else f" ({found.message} The model list was not checked.)"
    return Check("model", OK, f"{model} at {base_url}, reachable{listed}")  # fmt: skip


def run_checks(values: dict[str, Any], resolve: Callable[[str, str | None], dict[str, Any]]) -> list[Check]:
    hermes_home = Path(values["hermes_home"])
    checks = [
        check_config_file(hermes_home),
        check_state_dir(Path(values["state_dir"])),
        check_state_db(hermes_home / "state.db"),
    ]
    if checks[0].status != FAIL:
        checks.append(check_model(hermes_home, resolve))
    return checks


def render(checks: list[Check]) -> str:
    lines = []
    for check in checks:
        lines.append(f"{check.status:<5} {check.name:<10} {check.detail}")
        if check.fix and check.status != OK:
            lines.append(f"{'':<16} fix: {check.fix}")
    failed = sum(check.status == FAIL for check in checks)
    lines.append("All checks passed." if not failed else f"{failed} check(s) failed.")
    return "\n".join(lines)

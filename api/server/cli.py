"""The ``talaria`` command: flags → settings → logging → startup recovery → serve; ``doctor``; ``--version``.

A setting that does not fit (``--port 99999``, ``TALARIA_PORT=abc``) is one line on stderr and exit
status 2; ``talaria doctor`` prints its checks and exits 1 when one failed. At start the banner says
where to open the page, where things live and whether a model is configured. Serving itself is
``api.server.http_server``.
"""

from __future__ import annotations

import argparse
import logging
import secrets
import sys
import threading
from importlib import metadata
from pathlib import Path
from typing import Any

from api.agent import agent_runtime, interrupted_turns, provider_errors
from api.server import app_server, doctor, log_setup
from api.server.app import App
from api.services import goal_loop, session_recovery, turn_queue, workspace
from api.store import atomic, config, settings_table, state_lock
from api.web import auth

log = logging.getLogger("talaria.server")

EXIT_BAD_SETTING = 2
DIST_NAME = "talaria-webui"


def version() -> str:
    try:
        return metadata.version(DIST_NAME)
    except metadata.PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown"


def build_arg_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="talaria",
        usage="talaria [--host HOST] [--port PORT] [--state-dir DIR] [--hermes-home DIR] [--log-level LEVEL]"
        " [--version] [doctor]",
        description="Talaria: a durable self-hosted web UI for the Hermes agent.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="commands:\n  doctor    check the config, state dir, state.db and model, each with a fix\n\n"
        "settings (the environment variable wins, then the key in $HERMES_HOME/config.yaml, then the default):\n"
        + settings_table.settings_help(),
    )
    parser.add_argument("command", nargs="?", choices=["doctor"], help=argparse.SUPPRESS)
    parser.add_argument(
        "--host", help="address to listen on (default 127.0.0.1; anything else needs a password)"
    )
    # Numbers are checked by the settings table, so a bad one reads the same from a flag or the environment.
    parser.add_argument("--port", help="TCP port (default 8787; 0 picks a free one)")
    parser.add_argument("--state-dir", help="Talaria's state folder (default $HERMES_HOME/webui)")
    parser.add_argument("--hermes-home", help="the agent's home folder (default ~/.hermes)")
    parser.add_argument("--log-level", help="DEBUG, INFO (default), WARNING or ERROR")
    parser.add_argument("--version", action="version", version=f"talaria {version()}")
    return parser


def settings_from(args: argparse.Namespace) -> dict[str, Any]:
    """Every setting, the flags first; raises ``settings_table.SettingError`` for a value that does not fit."""
    return settings_table.load_settings(
        overrides={
            "host": args.host,
            "port": args.port,
            "state_dir": args.state_dir,
            "hermes_home": args.hermes_home,
            "log_level": args.log_level,
        }
    )


def model_line() -> str:
    model, provider, base_url = config.resolve_model_provider(None)
    if not model:
        return (
            f"none configured: open the page to set one up, or run `{provider_errors.hermes_command()} "
            f"setup`, or add a `model:` section to {config.HERMES_HOME / 'config.yaml'}"
        )
    where = " at ".join(part for part in (provider, base_url) if part)
    return f"{model} ({where})" if where else model


def workspace_line() -> str:

    roots = workspace.roots()
    within = f" (sessions may use folders under {', '.join(map(str, roots))})" if roots else ""
    return workspace.default() + within


def banner(url: str, log_path: object) -> str:
    """What a person needs at start: where to open it, where things live, whether a model is set."""
    rows = [
        ("state dir", str(config.STATE_DIR)),
        ("workspace", workspace_line()),
        ("model", model_line()),
        ("log file", str(log_path) if log_path else "none (terminal only)"),
    ]
    lines = [f"Talaria listening on {url}"]
    lines += [f"  {label:<10} {value}" for label, value in rows]
    lines.append("Stop with Ctrl+C (or SIGTERM). `talaria doctor` checks the set-up.")
    return "\n".join(lines)


def run_doctor(values: dict[str, Any]) -> int:

    checks = doctor.run_checks(values, agent_runtime.resolve_runtime)
    print(doctor.render(checks))
    return 1 if any(check.status == doctor.FAIL for check in checks) else 0


def bad_setting(exc: Exception) -> int:
    print(f"talaria: {exc}", file=sys.stderr)
    return EXIT_BAD_SETTING


def run_startup_recovery(session_dir: Path) -> dict[str, Any]:
    """The startup sweep of ``session_dir`` plus the interrupted-turn markers; never raises."""
    summary: dict[str, Any] = {"scanned": 0, "restored": 0, "details": [], "interrupted_turns": []}
    for folder in (config.STATE_DIR, session_dir):
        try:
            atomic.sweep_leftover_temps(folder)  # what a killed write left; each removal is logged
        except OSError:
            log.exception("sweeping temp files in %s failed", folder)
    try:
        summary.update(
            session_recovery.recover_all_sessions_on_startup(
                session_dir, rebuild_index=True, state_db_path=config.STATE_DB_PATH
            )
        )
    except Exception as exc:  # noqa: BLE001 - startup goes on whatever the folder holds
        log.exception("startup recovery failed")
        summary["error"] = str(exc)
    try:
        summary["interrupted_turns"] = interrupted_turns.recover_interrupted_turns(session_dir)
    except Exception as exc:  # noqa: BLE001
        log.exception("marking interrupted turns failed")
        summary["interrupted_error"] = str(exc)
    log.info(
        "startup recovery: scanned %s, restored %s, orphaned backups %s, interrupted turns %s%s",
        summary.get("scanned"),
        summary.get("restored"),
        summary.get("orphaned_backups", 0),
        len(summary.get("interrupted_turns") or []),
        f", errors {summary['errors']}" if summary.get("errors") else "",
    )
    return summary


def build_auth(values: dict[str, Any]) -> auth.AuthManager:
    """The auth manager (auth off when the password is empty); refuses a non-loopback host without one."""

    auth.check_bind_allowed(values["host"], values["password"])
    if not values["password"]:
        secret = secrets.token_bytes(32)  # auth is off: nothing is signed, nothing to keep
    elif values["secret_key"]:
        secret = values["secret_key"].encode("utf-8")
        if len(secret) < 16:
            raise ValueError("secret_key must be at least 16 characters")
    else:
        secret = auth.load_or_create_secret(Path(values["state_dir"]))
    return auth.AuthManager(values["password"], secret)


def _resume_after_restart(application: App, interrupted: list[str], session_dir: Path) -> None:
    goal_loop.after_restart(
        interrupted, locks=application.goal_locks, turns=application.turns, store=application.store
    )
    turn_queue.resume_waiting(
        session_dir, store=application.store, work=application.work, turns=application.turns
    )


def main(argv: list[str] | None = None) -> int:

    args = build_arg_parser().parse_args(argv)
    try:
        values = settings_from(args)
    except settings_table.SettingError as exc:
        return bad_setting(exc)
    config.configure(values)
    if args.command == "doctor":
        return run_doctor(values)
    state_lock.hold_or_exit(config.STATE_DIR)
    application = App()
    try:
        application.auth = build_auth(values)
    except ValueError as exc:
        return bad_setting(exc)
    log_path = log_setup.configure_logging(values["log_level"], values["state_dir"])
    session_dir = application.store.session_dir
    session_dir.mkdir(parents=True, exist_ok=True)
    summary = run_startup_recovery(session_dir)
    application.startup_recovery = summary
    try:
        server = app_server.make_server(application, values["host"], values["port"])
    except OSError as exc:
        print(f"talaria: cannot listen on {values['host']}:{values['port']}: {exc}", file=sys.stderr)
        return 1
    application.start()  # after recovery, so the search index is checked against the files recovery left
    host, port = server.server_address[:2]
    shown = f"[{host}]" if ":" in host else host
    print(banner(f"http://{shown}:{port}", log_path), flush=True)
    # Goals whose turn the restart cut short pause; messages queued behind a turn the last run of the server
    # did not finish run now, tab or no tab.
    threading.Thread(
        target=_resume_after_restart,
        args=(application, summary.get("interrupted_turns") or [], session_dir),
        name="queue-resume",
        daemon=True,
    ).start()
    app_server.serve(server)
    log.info("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())

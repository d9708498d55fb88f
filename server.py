"""Talaria's entry point (also the ``talaria`` console script): flags → settings → startup recovery → serve.

Serving itself is ``api.http_server`` (``make_server`` and ``serve``).
"""

from __future__ import annotations

import argparse
import logging
import secrets
import sys
from pathlib import Path

log = logging.getLogger("talaria.server")

# ---------------------------------------------------------------------- startup


def build_arg_parser() -> argparse.ArgumentParser:
    from api import config

    parser = argparse.ArgumentParser(
        prog="talaria",
        description="Talaria: a durable self-hosted web UI for the Hermes agent.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="settings (environment variable wins, then 'webui:' in $HERMES_HOME/config.yaml, then the default):\n"
        + config.settings_help(),
    )
    parser.add_argument(
        "--host", help="address to listen on (default 127.0.0.1; anything else needs a password)"
    )
    parser.add_argument("--port", type=int, help="TCP port (default 8787; 0 picks a free one)")
    parser.add_argument("--state-dir", help="Talaria's state folder (default $HERMES_HOME/webui)")
    parser.add_argument("--hermes-home", help="the agent's home folder (default ~/.hermes)")
    return parser


def run_startup_recovery() -> dict:
    """The startup sweep plus the interrupted-turn markers; never raises."""
    from api import config

    summary: dict = {"scanned": 0, "restored": 0, "details": [], "interrupted_turns": []}
    try:
        from api.session_recovery import recover_all_sessions_on_startup

        summary.update(
            recover_all_sessions_on_startup(
                config.SESSION_DIR, rebuild_index=True, state_db_path=config.STATE_DB_PATH
            )
        )
    except Exception as exc:  # noqa: BLE001 - startup goes on whatever the folder holds
        log.exception("startup recovery failed")
        summary["error"] = str(exc)
    try:
        from api import streaming

        summary["interrupted_turns"] = streaming.recover_interrupted_turns(config.SESSION_DIR)
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


def build_auth(values: dict):
    """The auth manager (auth off when the password is empty); refuses a non-loopback host without one."""
    from api import auth

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


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    args = build_arg_parser().parse_args(argv)
    from api import config

    values = config.load_settings(
        overrides={
            "host": args.host,
            "port": args.port,
            "state_dir": args.state_dir,
            "hermes_home": args.hermes_home,
        }
    )
    config.apply_settings(values)
    try:
        auth = build_auth(values)
    except ValueError as exc:
        print(f"talaria: {exc}", file=sys.stderr)
        return 2
    Path(config.SESSION_DIR).mkdir(parents=True, exist_ok=True)
    summary = run_startup_recovery()

    from api import http_server, routes

    routes.configure(auth=auth, startup_recovery=summary)
    try:
        server = http_server.make_server(values["host"], values["port"])
    except OSError as exc:
        print(f"talaria: cannot listen on {values['host']}:{values['port']}: {exc}", file=sys.stderr)
        return 1
    host, port = server.server_address[:2]
    shown = f"[{host}]" if ":" in host else host
    print(f"Talaria listening on http://{shown}:{port}", flush=True)
    http_server.serve(server)
    log.info("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())

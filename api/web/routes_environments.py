"""Routes for execution environments: the list, its edits, what the agent copies there and the confirmation,
"Test connection", and a session's choice.

Thin handlers as in ``api.web.routes`` (parse → one domain call → ``j``); ``api.web.routes`` merges ``ROUTES``.
"""

from __future__ import annotations

from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from typing import Any

from api.services import environment_check, environments
from api.web.http_io import j, require_session_id
from api.web.served import app_of


def _handle_environments(handler: BaseHTTPRequestHandler, query: dict[str, Any]) -> None:
    j(handler, environments.list_environments())


def _handle_environments_update(handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
    j(handler, environments.update(body, app_of(handler).environment_pools))


def _handle_environment_copies(handler: BaseHTTPRequestHandler, query: dict[str, Any]) -> None:
    j(handler, environment_check.copies(query.get("name")))


def _handle_environment_confirm(handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
    j(handler, environments.confirm(body.get("name")))


def _handle_environment_test(handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
    j(handler, environment_check.test_connection(body.get("name")))


def _handle_session_environment(handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
    sid = require_session_id(body.get("session_id"))
    store = app_of(handler).store
    j(handler, {"session": environment_check.set_for_session(sid, body.get("environment"), store=store)})


ROUTES: dict[tuple[str, str], Callable[[Any, dict[str, Any]], None]] = {
    ("GET", "/api/environments"): _handle_environments,
    ("POST", "/api/environments"): _handle_environments_update,
    ("GET", "/api/environments/copies"): _handle_environment_copies,
    ("POST", "/api/environments/confirm"): _handle_environment_confirm,
    ("POST", "/api/environments/test"): _handle_environment_test,
    ("POST", "/api/session/environment"): _handle_session_environment,
}

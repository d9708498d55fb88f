"""Routes of projects and the sidebar's bulk actions, with hermes-webui's names (``/api/projects...``,
``/api/session/move``). Thin handlers as in ``api.web.routes`` (parse → one domain call → ``j``); ``api.web.routes``
merges ``ROUTES``.
"""

from __future__ import annotations

from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from typing import Any

from api.services import project_ops
from api.store import projects
from api.web.http_io import j
from api.web.served import app_of


def _handle_list(handler: BaseHTTPRequestHandler, _query: dict[str, Any]) -> None:
    j(
        handler,
        {"projects": projects.list_projects(store=app_of(handler).store), "palette": list(projects.PALETTE)},
    )


def _handle_create(handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
    j(
        handler,
        {
            "ok": True,
            "project": projects.create_project(
                body.get("name"), body.get("color"), store=app_of(handler).store
            ),
        },
    )


def _handle_rename(handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
    project = projects.rename_project(
        body.get("project_id"), body.get("name"), body.get("color"), store=app_of(handler).store
    )
    j(handler, {"ok": True, "project": project})


def _handle_delete(handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
    j(handler, project_ops.delete_project(body.get("project_id"), store=app_of(handler).store))


def _handle_move(handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
    j(
        handler,
        {
            "ok": True,
            **project_ops.move_session(
                body.get("session_id"), body.get("project_id"), store=app_of(handler).store
            ),
        },
    )


def _handle_bulk(handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
    app = app_of(handler)
    j(handler, project_ops.bulk(body, store=app.store, turns=app.turns))


ROUTES: dict[tuple[str, str], Callable[[Any, dict[str, Any]], None]] = {
    ("GET", "/api/projects"): _handle_list,
    ("POST", "/api/projects/create"): _handle_create,
    ("POST", "/api/projects/rename"): _handle_rename,
    ("POST", "/api/projects/delete"): _handle_delete,
    ("POST", "/api/session/move"): _handle_move,
    ("POST", "/api/sessions/bulk"): _handle_bulk,
}

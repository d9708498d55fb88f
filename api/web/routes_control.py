"""Routes for the person's control of a turn: approvals, clarify answers, the queue (queue, steer,
interrupt), the session's standing goal (the agent's ``/goal``), the session's workspace.

Thin handlers as in ``api.web.routes`` (parse → one domain call → ``j``); ``api.web.routes`` merges ``ROUTES``.
"""

from __future__ import annotations

from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from typing import Any

from api.agent import approvals, clarify
from api.services import goal_loop, session_catalogue, turn_queue, workspace
from api.web.http_io import j, require_session_id
from api.web.served import app_of


def _sid(source: dict[str, Any]) -> str:
    return require_session_id(source.get("session_id"))


def _handle_approval_respond(handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
    questions = app_of(handler).approvals
    j(
        handler,
        approvals.respond(_sid(body), body.get("approval_id"), body.get("choice"), questions=questions),
    )


def _handle_approval_pending(handler: BaseHTTPRequestHandler, query: dict[str, Any]) -> None:
    app = app_of(handler)
    j(handler, approvals.pending(_sid(query), questions=app.approvals, switches=app.yolo, store=app.store))


def _handle_approval_yolo(handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
    app, enabled = app_of(handler), body.get("enabled")
    j(handler, approvals.set_yolo(_sid(body), enabled, switches=app.yolo, store=app.store))


def _handle_clarify_respond(handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
    questions = app_of(handler).clarify
    j(handler, clarify.respond(_sid(body), body.get("clarify_id"), body.get("response"), questions=questions))


def _handle_clarify_pending(handler: BaseHTTPRequestHandler, query: dict[str, Any]) -> None:
    app = app_of(handler)
    j(handler, clarify.pending(_sid(query), questions=app.clarify, store=app.store))


def _handle_queue_send(handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
    app = app_of(handler)
    message, mode, attached = body.get("message"), body.get("mode", "queue"), body.get("attachments")
    sent = turn_queue.send(
        _sid(body), message, mode, attached, work=app.work, turns=app.turns, store=app.store
    )
    j(handler, sent)


def _handle_queue_edit(handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
    app, item, message = app_of(handler), body.get("queue_id"), body.get("message")
    edited = turn_queue.edit(_sid(body), item, message, work=app.work, turns=app.turns, store=app.store)
    j(handler, edited)


def _handle_queue_cancel(handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
    app = app_of(handler)
    j(handler, turn_queue.cancel(_sid(body), body.get("queue_id"), store=app.store, turns=app.turns))


def _handle_session_workspace(handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
    store = app_of(handler).store
    j(handler, {"session": session_catalogue.set_workspace(_sid(body), body.get("workspace"), store=store)})


def _handle_workspaces(handler: BaseHTTPRequestHandler, query: dict[str, Any]) -> None:
    j(handler, workspace.overview(store=app_of(handler).store))


def _handle_goal(handler: BaseHTTPRequestHandler, query: dict[str, Any]) -> None:
    j(handler, goal_loop.current(_sid(query), store=app_of(handler).store))


def _handle_goal_command(handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
    app = app_of(handler)
    j(
        handler,
        goal_loop.command(
            _sid(body),
            body.get("args", ""),
            locks=app.goal_locks,
            work=app.work,
            turns=app.turns,
            store=app.store,
        ),
    )


ROUTES: dict[tuple[str, str], Callable[[Any, dict[str, Any]], None]] = {
    ("POST", "/api/approval/respond"): _handle_approval_respond,
    ("GET", "/api/approval/pending"): _handle_approval_pending,
    ("POST", "/api/approval/yolo"): _handle_approval_yolo,
    ("POST", "/api/clarify/respond"): _handle_clarify_respond,
    ("GET", "/api/clarify/pending"): _handle_clarify_pending,
    ("POST", "/api/session/queue"): _handle_queue_send,
    ("POST", "/api/session/queue/edit"): _handle_queue_edit,
    ("POST", "/api/session/queue/cancel"): _handle_queue_cancel,
    ("GET", "/api/session/goal"): _handle_goal,
    ("POST", "/api/session/goal"): _handle_goal_command,
    ("POST", "/api/session/workspace"): _handle_session_workspace,
    ("GET", "/api/workspaces"): _handle_workspaces,
}

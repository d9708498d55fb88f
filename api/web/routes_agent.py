"""Routes for what the agent runs with: the model picker, first-run setup, toolsets per session.

Thin handlers as in ``api.web.routes`` (parse → one domain call → ``j``); ``api.web.routes`` merges ``ROUTES``.
"""

from __future__ import annotations

from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from typing import Any

from api.agent import agent_setup, model_catalog, toolsets
from api.web.http_io import j, require_session_id
from api.web.served import app_of

_TRUE = ("1", "true", "yes", "on")


def _handle_models(handler: BaseHTTPRequestHandler, query: dict[str, Any]) -> None:
    refresh = query.get("refresh", "") in _TRUE
    j(handler, model_catalog.catalog_for_page(refresh=refresh, answers=app_of(handler).agent_answers))


def _handle_session_model(handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
    sid = require_session_id(body.get("session_id"))
    app, model, provider = app_of(handler), body.get("model"), body.get("model_provider")
    row = model_catalog.switch_session_model(sid, model, provider, app.agent_answers, store=app.store)
    j(handler, {"session": row})


def _handle_toolsets(handler: BaseHTTPRequestHandler, query: dict[str, Any]) -> None:
    sid, app = query.get("session_id"), app_of(handler)
    sid = None if sid in (None, "") else require_session_id(sid)
    listed = toolsets.list_for_session(
        sid, answers=app.agent_answers, discovery=app.discovery, store=app.store
    )
    j(handler, listed)


def _handle_session_toolsets(handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
    sid = require_session_id(body.get("session_id"))
    app, chosen = app_of(handler), body.get("enabled_toolsets")
    row = toolsets.set_session_toolsets(sid, chosen, discovery=app.discovery, store=app.store)
    j(handler, {"session": row})


def _handle_onboarding_status(handler: BaseHTTPRequestHandler, query: dict[str, Any]) -> None:
    j(handler, agent_setup.setup_status())


def _handle_onboarding_probe(handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
    j(handler, agent_setup.test_connection(body))


def _handle_onboarding_setup(handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
    app = app_of(handler)
    j(
        handler,
        agent_setup.save_setup(body, answers=app.agent_answers, agents=app.agents, workers=app.workers),
    )


ROUTES: dict[tuple[str, str], Callable[[Any, dict[str, Any]], None]] = {
    ("GET", "/api/models"): _handle_models,
    ("POST", "/api/session/model"): _handle_session_model,
    ("GET", "/api/toolsets"): _handle_toolsets,
    ("POST", "/api/session/toolsets"): _handle_session_toolsets,
    ("GET", "/api/onboarding/status"): _handle_onboarding_status,
    ("POST", "/api/onboarding/probe"): _handle_onboarding_probe,
    ("POST", "/api/onboarding/setup"): _handle_onboarding_setup,
}

"""Routes for a session's unsent draft (hermes-webui's ``/api/session/draft``).

Thin handlers as in ``api.web.routes`` (parse → one domain call → ``j``); ``api.web.routes`` merges ``ROUTES``.
"""

from __future__ import annotations

from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from typing import Any

from api.services import session_drafts
from api.web.http_io import j, require_session_id
from api.web.served import app_of


def _handle_draft_get(handler: BaseHTTPRequestHandler, query: dict[str, Any]) -> None:
    j(
        handler,
        session_drafts.get_draft(require_session_id(query.get("session_id")), store=app_of(handler).store),
    )


def _handle_draft_save(handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
    sid, store = require_session_id(body.get("session_id")), app_of(handler).store
    j(handler, session_drafts.save_draft(sid, body.get("text"), store=store))


ROUTES: dict[tuple[str, str], Callable[[Any, dict[str, Any]], None]] = {
    ("GET", "/api/session/draft"): _handle_draft_get,
    ("POST", "/api/session/draft"): _handle_draft_save,
}

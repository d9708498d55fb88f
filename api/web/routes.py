"""The route table and its thin handlers: parse → call one domain function → ``j(...)``.

Every handler is ``_handle_<name>(handler, body_or_query)`` with a ``BaseHTTPRequestHandler``-shaped
``handler``.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from importlib import metadata
from typing import TYPE_CHECKING, Any, Protocol

from api.agent.turn_journal import LiveTurns
from api.rules.errors import ApiError, BadRequest, NotFound, PayloadTooLarge, redact_paths
from api.services import (
    agent_import,
    attachments,
    branch,
    compression,
    session_catalogue,
    session_export,
    session_ops,
    session_recovery,
    session_search,
    session_versions,
    session_views,
    streaming,
    workspace_files,
)
from api.store import models
from api.web import (
    http_io,
    routes_agent,
    routes_control,
    routes_cron,
    routes_drafts,
    routes_environments,
    routes_files,
    routes_projects,
    routes_toolbox,
    sse,
)
from api.web.http_io import (
    bad,
    header,
    j,
    optional_str,
    query_int,
    require_session_id,
    respond_error,
)
from api.web.served import app_of

if TYPE_CHECKING:
    from api.web.auth import AuthManager

log = logging.getLogger("talaria.routes")

MESSAGE_MAX_BYTES = 200 * 1024


def _auth(handler: BaseHTTPRequestHandler) -> AuthManager | None:
    """The login of the app serving this request; None (login off) for a handler outside a server."""
    return app_of(handler).auth


def startup_recovery(handler: BaseHTTPRequestHandler) -> dict[str, Any]:
    summary = app_of(handler).startup_recovery
    if summary is None:
        return {"scanned": 0, "restored": 0, "details": [], "interrupted_turns": [], "ran": False}
    return summary


@functools.cache
def _version() -> str:
    try:
        return metadata.version("talaria-webui")
    except metadata.PackageNotFoundError:
        return "0.0.0"


# ---------------------------------------------------------------------- small parsing helpers


def _sid(source: dict[str, Any], field: str = "session_id") -> str:
    return require_session_id(source.get(field), field)


def _msg_limit(query: dict[str, Any]) -> int | None:
    return query_int(query, "msg_limit", minimum=1)


def _focus(body: dict[str, Any]) -> str | None:
    """``focus_topic`` (or ``topic``); ``api.services.compression`` strips and cuts it."""
    value = body.get("focus_topic", body.get("topic"))
    if value is not None and not isinstance(value, str):
        raise BadRequest("focus_topic must be a string")
    return value


def _with_full_session(result: dict[str, Any], sid: str, store: models.Store) -> dict[str, Any]:
    """``{"ok": true, **result, "session": full session}`` for the history edits."""
    return {
        "ok": True,
        **{k: v for k, v in result.items() if k != "session"},
        "session": session_views.full_session_by_id(sid, store=store),
    }


# ---------------------------------------------------------------------- health, sessions


def _handle_health(handler: BaseHTTPRequestHandler, query: dict[str, Any]) -> None:
    j(
        handler,
        {
            "ok": True,
            "version": _version(),
            "sessions": app_of(handler).store.count(),
            # Public even with login on: counts only (details, with file names, are behind the login).
            "recovery": {
                k: len(v) if isinstance(v, list) else v
                for k, v in startup_recovery(handler).items()
                if k != "error"
            },
        },
    )


def _handle_sessions(handler: BaseHTTPRequestHandler, query: dict[str, Any]) -> None:
    limit = query_int(query, "limit", minimum=1)
    app, cursor, project_id = app_of(handler), query.get("cursor") or None, query.get("project_id")
    page = session_views.sessions_page_json(
        limit, cursor, project_id, feed=app.feed, agent_rows=app.agent_rows, store=app.store
    )
    http_io.j_bytes(handler, page)


def _handle_sessions_feed(handler: BaseHTTPRequestHandler, query: dict[str, Any]) -> None:
    raw = header(handler, "Last-Event-ID")
    source = {"after": raw} if raw is not None and raw.strip() else query
    sse.serve_session_changes(handler, app_of(handler).feed, query_int(source, "after", max_digits=18))


def _handle_sessions_search(handler: BaseHTTPRequestHandler, query: dict[str, Any]) -> None:
    app = app_of(handler)
    j(handler, session_search.search_sessions(query, store=app.store, indexing=app.indexing))


def _handle_search_status(handler: BaseHTTPRequestHandler, query: dict[str, Any]) -> None:
    j(handler, session_search.status(indexing=app_of(handler).indexing))


def _handle_session_get(handler: BaseHTTPRequestHandler, query: dict[str, Any]) -> None:
    sid, store = _sid(query), app_of(handler).store
    before = query_int(query, "msg_before")
    j(handler, session_views.get_session_payload(sid, _msg_limit(query), before, store=store))


def _handle_session_new(handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
    model, folder, title, store = (
        body.get("model"),
        body.get("workspace"),
        body.get("title"),
        app_of(handler).store,
    )
    session = session_catalogue.create_session(model, folder, title, store=store)
    j(handler, {"session": session})


def _handle_session_rename(handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
    store = app_of(handler).store
    j(handler, {"session": session_catalogue.rename_session(_sid(body), body.get("title"), store=store)})


def _handle_session_pin(handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
    store = app_of(handler).store
    j(handler, {"session": session_catalogue.set_flag(_sid(body), "pinned", body.get("pinned"), store=store)})


def _handle_session_archive(handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
    flag, store = body.get("archived"), app_of(handler).store
    j(handler, {"session": session_catalogue.set_flag(_sid(body), "archived", flag, store=store)})


def _handle_session_delete(handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
    app = app_of(handler)
    j(handler, session_catalogue.delete_session(_sid(body), store=app.store, turns=app.turns))


def _handle_session_restore_deleted(handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
    store = app_of(handler).store
    j(handler, {"session": session_catalogue.restore_deleted(body.get("undo_token"), store=store)})


def _handle_session_export(handler: BaseHTTPRequestHandler, query: dict[str, Any]) -> None:
    store = app_of(handler).store
    body, content_type, filename = session_export.export_session(
        _sid(query), query.get("format", "json"), store=store
    )
    http_io.send_bytes(
        handler, body, content_type, headers={"Content-Disposition": f'attachment; filename="{filename}"'}
    )


def _handle_session_import(handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
    j(handler, {"session": session_export.import_session(body, store=app_of(handler).store)})


# ---------------------------------------------------------------------- history edits (api.services.session_ops)


class _HistoryEdit(Protocol):
    """A history edit of ``api.services.session_ops``, on the app's store and live turns."""

    def __call__(self, sid: str, *, store: models.Store, turns: LiveTurns) -> dict[str, Any]: ...


def _session_op(handler: BaseHTTPRequestHandler, body: dict[str, Any], op: _HistoryEdit) -> None:
    sid, app = _sid(body), app_of(handler)
    try:
        result = op(sid, store=app.store, turns=app.turns)
    except ValueError as exc:  # "nothing to retry/undo": answered 200 with an error, as hermes-webui does
        j(handler, {"error": str(exc)})
        return
    j(handler, _with_full_session(result, sid, app.store))


def _handle_session_retry(handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
    _session_op(handler, body, session_ops.retry_last)


def _handle_session_undo(handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
    _session_op(handler, body, session_ops.undo_last)


def _handle_session_truncate(handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
    keep = body.get("keep_count")
    _session_op(handler, body, functools.partial(session_ops.truncate_session, keep_count=keep))


def _handle_session_branch(handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
    app = app_of(handler)
    session = branch.branch_session(_sid(body), body.get("keep_count"), store=app.store, turns=app.turns)
    j(handler, {"session": session})


def _handle_session_versions(handler: BaseHTTPRequestHandler, query: dict[str, Any]) -> None:
    store = app_of(handler).store
    j(handler, session_versions.list_versions(_sid(query), query.get("message_index"), store=store))


def _handle_session_version(handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
    sid, app = _sid(body), app_of(handler)
    index, version = body.get("message_index"), body.get("version")
    result = session_versions.switch_version(sid, index, version, store=app.store, turns=app.turns)
    j(handler, _with_full_session(result, sid, app.store))


def _handle_session_import_cli(handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
    app = app_of(handler)
    j(
        handler,
        {
            "session": agent_import.import_agent_session(
                _sid(body),
                lock=app.import_lock,
                agent_rows=app.agent_rows,
                store=app.store,
                watch=app.agent_watch,
            )
        },
    )


def _handle_session_attach(handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
    app = app_of(handler)
    attached = attachments.store_attachment(
        _sid(body),
        body.get("name"),
        body.get("data"),
        store=app.store,
        environment_pools=app.environment_pools,
    )
    j(handler, {"attachment": attached})


def _handle_media(handler: BaseHTTPRequestHandler, query: dict[str, Any]) -> None:
    app = app_of(handler)
    data, content_type = workspace_files.read_image(
        _sid(query), query.get("path"), store=app.store, environment_pools=app.environment_pools
    )
    http_io.send_bytes(handler, data, content_type, cache="private, max-age=300")


def _handle_session_clear(handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
    _session_op(handler, body, session_ops.clear_session)


# ---------------------------------------------------------------------- compression (api.services.compression)


def _handle_session_compress(handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
    """Manual compression (docs/session-model.md, "Compression"); any failure that is not an ApiError is a 400."""
    try:
        sid = require_session_id(body.get("session_id") if isinstance(body, dict) else None)
        focus = _focus(body)
    except ApiError as exc:
        return respond_error(handler, exc)
    app = app_of(handler)
    try:
        result = compression.manual_compress(
            sid, focus, store=app.store, turns=app.turns, workers=app.workers
        )
    except ApiError as exc:
        return respond_error(handler, exc)
    except Exception as exc:  # noqa: BLE001 - a 400 with the (path-scrubbed) reason, as hermes-webui answers
        log.exception("compression of %s failed", sid)
        return bad(handler, f"Compression failed: {redact_paths(str(exc))}")
    return j(handler, result)


def _handle_session_compress_start(handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
    sid, focus, app = _sid(body), _focus(body), app_of(handler)
    started = compression.start_compress_job(
        sid, focus, app.jobs, store=app.store, turns=app.turns, workers=app.workers
    )
    j(handler, started)


def _handle_session_compress_status(handler: BaseHTTPRequestHandler, query: dict[str, Any]) -> None:
    j(handler, compression.compress_job_status(_sid(query), app_of(handler).jobs))


def _handle_session_uncompress(handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
    sid, app = _sid(body), app_of(handler)
    j(
        handler,
        _with_full_session(compression.uncompress(sid, store=app.store, turns=app.turns), sid, app.store),
    )


# ---------------------------------------------------------------------- recovery


def _handle_recovery_audit(handler: BaseHTTPRequestHandler, query: dict[str, Any]) -> None:
    j(handler, session_recovery.audit_live_sessions(store=app_of(handler).store))


def _handle_recovery_repair_safe(handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
    j(handler, session_recovery.repair_safe_live_sessions(store=app_of(handler).store))


def _handle_recovery_startup(handler: BaseHTTPRequestHandler, query: dict[str, Any]) -> None:
    j(handler, startup_recovery(handler))


# ---------------------------------------------------------------------- chat (api.services.streaming, api.web.sse)


def _handle_chat_start(handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
    sid = _sid(body)
    message = body.get("message")
    if isinstance(message, str) and len(message.encode("utf-8", "surrogatepass")) > MESSAGE_MAX_BYTES:
        raise PayloadTooLarge(f"message is too long (at most {MESSAGE_MAX_BYTES // 1024} KB)")
    model, app = optional_str(body, "model", 200), app_of(handler)
    attached = body.get("attachments")
    j(
        handler,
        streaming.start_turn(
            sid, message, model=model or None, attachment_paths=attached, work=app.work, turns=app.turns
        ),
    )


def _last_event_id(handler: BaseHTTPRequestHandler, query: dict[str, Any]) -> int | None:
    raw = header(handler, "Last-Event-ID")
    if raw is not None and raw.strip():
        return query_int({"Last-Event-ID": raw}, "Last-Event-ID")
    return query_int(query, "after")


def _handle_chat_stream(handler: BaseHTTPRequestHandler, query: dict[str, Any]) -> None:
    stream_id = require_session_id(query.get("stream_id"), "stream_id")
    after = _last_event_id(handler, query)
    turn = app_of(handler).turns.get_turn(stream_id)
    if turn is None:
        raise NotFound("Stream not found")
    sse.serve_turn_events(handler, turn, after)


def _handle_chat_cancel(handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
    stream_id, app = body.get("stream_id"), app_of(handler)
    if stream_id is not None:
        stream_id = require_session_id(stream_id, "stream_id")
        j(handler, streaming.cancel_turn(stream_id=stream_id, turns=app.turns, work=app.work))
        return
    j(handler, streaming.cancel_turn(session_id=_sid(body), turns=app.turns, work=app.work))


# ---------------------------------------------------------------------- auth (api.web.auth)


def _handle_auth_login(handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
    auth = _auth(handler)
    if auth is None or not auth.enabled:
        j(handler, {"ok": True, "csrf_token": None, "enabled": False})
        return
    password = body.get("password")
    if not isinstance(password, str) or len(password) > 4096:
        raise BadRequest("password must be a string")
    client = getattr(handler, "client_address", None) or ("", 0)
    cookie, csrf = auth.login(password, str(client[0]))
    j(handler, {"ok": True, "csrf_token": csrf}, headers={"Set-Cookie": auth.set_cookie_header(cookie)})


def _handle_auth_logout(handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
    auth = _auth(handler)
    if auth is None or not auth.enabled:
        j(handler, {"ok": True})
        return
    auth.logout(auth.session_from_cookie(header(handler, "Cookie")))
    j(handler, {"ok": True}, headers={"Set-Cookie": auth.clear_cookie_header()})


def _handle_auth_status(handler: BaseHTTPRequestHandler, query: dict[str, Any]) -> None:
    auth = _auth(handler)
    if auth is None or not auth.enabled:
        j(handler, {"enabled": False, "logged_in": True})
        return
    j(handler, auth.status(header(handler, "Cookie")))


# ---------------------------------------------------------------------- the table and dispatch

ROUTES: dict[tuple[str, str], Callable[[Any, dict[str, Any]], None]] = {
    ("GET", "/health"): _handle_health,
    ("GET", "/api/sessions"): _handle_sessions,
    ("GET", "/api/sessions/search"): _handle_sessions_search,
    ("GET", "/api/search/status"): _handle_search_status,
    ("GET", "/api/sessions/feed"): _handle_sessions_feed,
    ("GET", "/api/session"): _handle_session_get,
    ("POST", "/api/session/new"): _handle_session_new,
    ("POST", "/api/session/rename"): _handle_session_rename,
    ("POST", "/api/session/pin"): _handle_session_pin,
    ("POST", "/api/session/archive"): _handle_session_archive,
    ("POST", "/api/session/delete"): _handle_session_delete,
    ("POST", "/api/session/restore-deleted"): _handle_session_restore_deleted,
    ("POST", "/api/session/retry"): _handle_session_retry,
    ("POST", "/api/session/undo"): _handle_session_undo,
    ("POST", "/api/session/truncate"): _handle_session_truncate,
    ("POST", "/api/session/clear"): _handle_session_clear,
    ("POST", "/api/session/branch"): _handle_session_branch,
    ("GET", "/api/session/versions"): _handle_session_versions,
    ("POST", "/api/session/version"): _handle_session_version,
    ("POST", "/api/session/import_cli"): _handle_session_import_cli,
    ("GET", "/api/media"): _handle_media,
    ("POST", "/api/session/attach"): _handle_session_attach,
    ("POST", "/api/session/compress"): _handle_session_compress,
    ("POST", "/api/session/compress/start"): _handle_session_compress_start,
    ("GET", "/api/session/compress/status"): _handle_session_compress_status,
    ("POST", "/api/session/uncompress"): _handle_session_uncompress,
    ("GET", "/api/session/export"): _handle_session_export,
    ("POST", "/api/session/import"): _handle_session_import,
    ("GET", "/api/session/recovery/audit"): _handle_recovery_audit,
    ("POST", "/api/session/recovery/repair-safe"): _handle_recovery_repair_safe,
    ("GET", "/api/recovery/startup"): _handle_recovery_startup,
    ("POST", "/api/chat/start"): _handle_chat_start,
    ("GET", "/api/chat/stream"): _handle_chat_stream,
    ("POST", "/api/chat/cancel"): _handle_chat_cancel,
    ("POST", "/api/auth/login"): _handle_auth_login,
    ("POST", "/api/auth/logout"): _handle_auth_logout,
    ("GET", "/api/auth/status"): _handle_auth_status,
    **routes_agent.ROUTES,
    **routes_control.ROUTES,
    **routes_cron.ROUTES,
    **routes_environments.ROUTES,
    **routes_drafts.ROUTES,
    **routes_files.ROUTES,
    **routes_projects.ROUTES,
    **routes_toolbox.ROUTES,
}
PATHS: frozenset[str] = frozenset(path for _, path in ROUTES)
# Reachable without a login cookie (the page itself is static and always served).
PUBLIC_PATHS: frozenset[str] = frozenset({"/health"} | {p for p in PATHS if p.startswith("/api/auth/")})


# Long-lived responses: the serving loop gives each its own thread from the stream budget.
STREAM_ROUTES: frozenset[tuple[str, str]] = frozenset(
    {("GET", "/api/chat/stream"), ("GET", "/api/sessions/feed")}
)


def is_stream_route(method: str, path: str) -> bool:
    return (method, path) in STREAM_ROUTES


def is_api_path(path: str) -> bool:
    return path in PATHS or path == "/api" or path.startswith("/api/")


def _check_auth(handler: BaseHTTPRequestHandler, method: str, path: str) -> None:
    auth = _auth(handler)
    if auth is None or not auth.enabled or path in PUBLIC_PATHS:
        return
    auth.authorize(header(handler, "Cookie"), header(handler, "X-CSRF-Token"), state_changing=method != "GET")


def dispatch(
    handler: BaseHTTPRequestHandler,
    method: str,
    path: str,
    query: dict[str, Any],
    body: dict[str, Any] | None = None,
) -> None:
    """Answer one API request. ``body`` None on a POST means: read it from ``handler`` after the auth check."""
    try:
        route = ROUTES.get((method, path))
        if route is None:
            allowed = sorted(m for m, p in ROUTES if p == path)
            if allowed:
                j(
                    handler,
                    {"error": f"Method {method} not allowed"},
                    405,
                    headers={"Allow": ", ".join(allowed)},
                )
            else:
                j(handler, {"error": "Not found"}, 404)
            return
        _check_auth(handler, method, path)
        if method == "POST":
            payload = http_io.read_body(handler) if body is None else body
        else:
            payload = query
        route(handler, payload)
    except Exception as exc:  # noqa: BLE001 - one place turns every failure into the JSON error shape
        respond_error(handler, exc)

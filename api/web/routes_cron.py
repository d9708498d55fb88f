"""Routes of the cron panel over the agent's own cron store (``/api/cron/...``; hermes-webui has no cron
routes to follow). Thin handlers as in ``api.web.routes`` (parse → one domain call → ``j``); ``api.web.routes``
merges ``ROUTES``.
"""

from __future__ import annotations

from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from typing import Any

from api.agent import agent_cron, cron_ticker
from api.web.http_io import j
from api.web.served import app_of


def _handle_jobs(handler: BaseHTTPRequestHandler, _query: dict[str, Any]) -> None:
    j(handler, cron_ticker.overview(app_of(handler).cron_ticker))


def _handle_status(handler: BaseHTTPRequestHandler, _query: dict[str, Any]) -> None:
    j(handler, cron_ticker.status(app_of(handler).cron_ticker))


def _handle_runs(handler: BaseHTTPRequestHandler, query: dict[str, Any]) -> None:
    j(handler, agent_cron.job_runs(query.get("job_id")))


def _handle_create(handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
    j(handler, {"job": cron_ticker.create_job(body, app_of(handler).cron_ticker)})


def _handle_update(handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
    fields = {name: value for name, value in body.items() if name != "job_id"}
    j(handler, {"job": agent_cron.update_job(body.get("job_id"), fields)})


def _handle_pause(handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
    j(handler, {"job": agent_cron.pause_job(body.get("job_id"))})


def _handle_resume(handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
    j(handler, {"job": agent_cron.resume_job(body.get("job_id"))})


def _handle_run(handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
    j(handler, {"job": cron_ticker.run_now(body.get("job_id"), app_of(handler).cron_ticker)})


def _handle_delete(handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
    j(handler, agent_cron.delete_job(body.get("job_id")))


ROUTES: dict[tuple[str, str], Callable[[Any, dict[str, Any]], None]] = {
    ("GET", "/api/cron/jobs"): _handle_jobs,
    ("GET", "/api/cron/status"): _handle_status,
    ("GET", "/api/cron/runs"): _handle_runs,
    ("POST", "/api/cron/create"): _handle_create,
    ("POST", "/api/cron/update"): _handle_update,
    ("POST", "/api/cron/pause"): _handle_pause,
    ("POST", "/api/cron/resume"): _handle_resume,
    ("POST", "/api/cron/run"): _handle_run,
    ("POST", "/api/cron/delete"): _handle_delete,
}

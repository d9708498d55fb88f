"""Routes of the files panel, with hermes-webui's names and parameters (``/api/list``, ``/api/file``,
``/api/file/raw``, ``/api/file/save|create|rename|delete``, ``/api/folder/download``, ``/api/file/upload``, ``/api/rollback/list|diff|restore``, each turn's changes (``/api/rollback/turns``, ``/api/rollback/turn[/diff|/restore|/undo]``), ``/api/git/status|diff``) and the trash. Thin handlers as in
``api.web.routes`` (parse → one domain call → ``j``); ``api.web.routes`` merges ``ROUTES``."""

from __future__ import annotations

from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import quote

from api.services import turn_changes, workspace_changes, workspace_files, workspace_git, workspace_transfer
from api.web import http_io
from api.web.http_io import j, require_session_id
from api.web.served import app_of

_TRUE = ("1", "true", "yes", "on")


def _files_of(handler: BaseHTTPRequestHandler) -> dict[str, Any]:
    """The app's objects a session's files are reached through: its store and its environments' workers."""
    app = app_of(handler)
    return {"store": app.store, "environment_pools": app.environment_pools}


def _sid(source: dict[str, Any]) -> str:
    return require_session_id(source.get("session_id"))


def _handle_list(handler: BaseHTTPRequestHandler, query: dict[str, Any]) -> None:
    j(
        handler,
        workspace_files.list_folder(
            _sid(query), query.get("path", ""), query.get("hidden", "") in _TRUE, **_files_of(handler)
        ),
    )


def _handle_file(handler: BaseHTTPRequestHandler, query: dict[str, Any]) -> None:
    j(
        handler,
        workspace_files.read_file(_sid(query), query.get("path"), **_files_of(handler)),
    )


def _disposition(kind: str, name: str) -> dict[str, str]:
    return {"Content-Disposition": f"{kind}; filename*=UTF-8''{quote(name, safe='')}"}


def _handle_file_raw(handler: BaseHTTPRequestHandler, query: dict[str, Any]) -> None:
    data, content_type, name = workspace_files.raw_file(_sid(query), query.get("path"), **_files_of(handler))
    inline = query.get("download", "") not in _TRUE and not content_type.startswith("text/")
    headers = _disposition("inline" if inline else "attachment", name)
    http_io.send_bytes(handler, data, content_type, headers=headers)


def _handle_folder_download(handler: BaseHTTPRequestHandler, query: dict[str, Any]) -> None:
    planned = workspace_transfer.folder_zip(
        _sid(query), query.get("path", ""), query.get("hidden", "") in _TRUE, **_files_of(handler)
    )
    headers = _disposition("attachment", f"{planned.name}.zip")
    http_io.send_produced(handler, planned.write, "application/zip", headers, planned.total_bytes)


def _handle_file_upload(handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
    j(
        handler,
        workspace_transfer.upload(
            _sid(body),
            body.get("path", ""),
            body.get("name"),
            body.get("data"),
            body.get("keep_both", False),
            **_files_of(handler),
        ),
    )


def _handle_file_save(handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
    j(
        handler,
        workspace_files.save_file(
            _sid(body), body.get("path"), body.get("content"), body.get("base_version"), **_files_of(handler)
        ),
    )


def _handle_file_create(handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
    j(
        handler,
        workspace_files.create(_sid(body), body.get("path"), body.get("kind", "file"), **_files_of(handler)),
    )


def _handle_file_rename(handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
    j(
        handler,
        workspace_files.rename(_sid(body), body.get("path"), body.get("new_path"), **_files_of(handler)),
    )


def _handle_file_delete(handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
    j(
        handler,
        workspace_files.delete(_sid(body), body.get("path"), **_files_of(handler)),
    )


def _handle_trash(handler: BaseHTTPRequestHandler, query: dict[str, Any]) -> None:
    j(
        handler,
        workspace_files.trash(_sid(query), **_files_of(handler)),
    )


def _handle_trash_restore(handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
    j(
        handler,
        workspace_files.restore(_sid(body), body.get("trash_id"), **_files_of(handler)),
    )


def _handle_trash_empty(handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
    j(
        handler,
        workspace_files.empty_trash(_sid(body), **_files_of(handler)),
    )


def _handle_rollback_list(handler: BaseHTTPRequestHandler, query: dict[str, Any]) -> None:
    j(
        handler,
        workspace_changes.list_checkpoints(_sid(query), **_files_of(handler)),
    )


def _handle_rollback_diff(handler: BaseHTTPRequestHandler, query: dict[str, Any]) -> None:
    j(
        handler,
        workspace_changes.diff(_sid(query), query.get("hash"), **_files_of(handler)),
    )


def _handle_rollback_restore(handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
    j(
        handler,
        workspace_changes.restore(_sid(body), body.get("hash"), body.get("path"), **_files_of(handler)),
    )


def _changes_of(handler: BaseHTTPRequestHandler) -> dict[str, Any]:
    """The app's objects each turn's changes are read through: its store, live turns and environments."""
    app = app_of(handler)
    return {"store": app.store, "turns": app.turns, "environment_pools": app.environment_pools}


def _handle_rollback_turns(handler: BaseHTTPRequestHandler, query: dict[str, Any]) -> None:
    j(handler, turn_changes.session_turns(_sid(query), **_changes_of(handler)))


def _handle_rollback_turn(handler: BaseHTTPRequestHandler, query: dict[str, Any]) -> None:
    j(handler, turn_changes.turn_files(_sid(query), query.get("turn"), **_changes_of(handler)))


def _handle_rollback_turn_diff(handler: BaseHTTPRequestHandler, query: dict[str, Any]) -> None:
    found = turn_changes.turn_diff(_sid(query), query.get("turn"), query.get("path"), **_changes_of(handler))
    j(handler, found)


def _handle_rollback_turn_restore(handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
    j(handler, turn_changes.restore_turn(_sid(body), body.get("turn"), **_changes_of(handler)))


def _handle_rollback_turn_undo(handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
    j(
        handler,
        turn_changes.undo_restore(_sid(body), body.get("turn"), body.get("undo"), **_changes_of(handler)),
    )


def _handle_git_status(handler: BaseHTTPRequestHandler, query: dict[str, Any]) -> None:
    j(
        handler,
        workspace_git.status(_sid(query), **_files_of(handler)),
    )


def _handle_git_diff(handler: BaseHTTPRequestHandler, query: dict[str, Any]) -> None:
    j(
        handler,
        workspace_git.diff(_sid(query), query.get("path"), **_files_of(handler)),
    )


ROUTES: dict[tuple[str, str], Callable[[Any, dict[str, Any]], None]] = {
    ("GET", "/api/list"): _handle_list,
    ("GET", "/api/file"): _handle_file,
    ("GET", "/api/file/raw"): _handle_file_raw,
    ("POST", "/api/file/save"): _handle_file_save,
    ("POST", "/api/file/upload"): _handle_file_upload,
    ("GET", "/api/folder/download"): _handle_folder_download,
    ("POST", "/api/file/create"): _handle_file_create,
    ("POST", "/api/file/rename"): _handle_file_rename,
    ("POST", "/api/file/delete"): _handle_file_delete,
    ("GET", "/api/trash"): _handle_trash,
    ("POST", "/api/trash/restore"): _handle_trash_restore,
    ("POST", "/api/trash/empty"): _handle_trash_empty,
    ("GET", "/api/rollback/list"): _handle_rollback_list,
    ("GET", "/api/rollback/diff"): _handle_rollback_diff,
    ("POST", "/api/rollback/restore"): _handle_rollback_restore,
    ("GET", "/api/rollback/turns"): _handle_rollback_turns,
    ("GET", "/api/rollback/turn"): _handle_rollback_turn,
    ("GET", "/api/rollback/turn/diff"): _handle_rollback_turn_diff,
    ("POST", "/api/rollback/turn/restore"): _handle_rollback_turn_restore,
    ("POST", "/api/rollback/turn/undo"): _handle_rollback_turn_undo,
    ("GET", "/api/git/status"): _handle_git_status,
    ("GET", "/api/git/diff"): _handle_git_diff,
}

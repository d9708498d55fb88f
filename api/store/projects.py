"""Projects: named, coloured groups of sessions, kept in ``<state>/projects.json`` as hermes-webui keeps them.

The file is hermes-webui's: a JSON list of ``{"project_id", "name", "color", "created_at"}``, so a person
switching between the two keeps their projects. A session names its project in its own ``project_id``
field; this module knows only the list. Every change is one durable write of the whole file
(``api.store.atomic``) under one lock. An entry this version cannot read (not an object, no usable id) is
logged and left out of the list but written back as it was; keys it does not know survive a change. A
file that is not a JSON list is never written over: reading it is a clear error until a person repairs it.
"""

from __future__ import annotations

import json
import logging
import re
import time
import uuid
from pathlib import Path
from typing import Any, cast

from api.rules import jsonio
from api.rules.errors import ApiError, BadRequest, Conflict, NotFound
from api.store import atomic, models
from api.store.safe_read import UnsafeFile, read_regular_file

log = logging.getLogger("talaria.projects")

FILE_NAME = "projects.json"
MAX_FILE_BYTES = 1 << 20
MAX_PROJECTS = 500
NAME_MAX = 100
# The colours the page offers; a new or changed colour is one of them.
PALETTE: tuple[str, ...] = (
    "#e5484d", "#f76b15", "#ffc53d", "#30a46c", "#12a594", "#0090ff", "#6e56cf", "#d6409f", "#8d8d8d",
)  # fmt: skip
_PROJECT_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")


class ProjectsUnreadable(ApiError):
    status = 500


def projects_file(*, store: models.Store | None = None) -> Path:
    """``<state_dir>/projects.json``: the session folder's parent holds it (of ``store``, the caller's app's)."""
    return models.store(store).session_dir.parent / FILE_NAME


def clean_project_id(value: Any) -> str:
    """A project id safe to compare and store: ``[A-Za-z0-9_-]{1,64}``."""
    if not isinstance(value, str) or not _PROJECT_ID.fullmatch(value):
        raise BadRequest("project_id must be 1 to 64 letters, digits, '-' or '_'")
    return value


def clean_name(value: Any) -> str:
    if not isinstance(value, str):
        raise BadRequest("name must be a string")
    name = " ".join(value.split())
    if not name:
        raise BadRequest("name must not be empty")
    if len(name) > NAME_MAX:
        raise BadRequest(f"name is too long (at most {NAME_MAX} characters)")
    if any(ord(c) < 32 or 0x7F <= ord(c) < 0xA0 for c in name):
        raise BadRequest("name must not hold control characters")
    return name


def clean_color(value: Any) -> str:
    if not isinstance(value, str) or value.lower() not in PALETTE:
        raise BadRequest("color must be one of " + ", ".join(PALETTE))
    return value.lower()


def _usable(entry: Any) -> bool:
    return (
        isinstance(entry, dict)
        and isinstance(entry.get("project_id"), str)
        and _PROJECT_ID.fullmatch(entry["project_id"]) is not None
    )


def _shown(entry: dict[str, Any]) -> dict[str, Any]:
    name = entry.get("name")
    color = entry.get("color")
    return {
        "project_id": entry["project_id"],
        "name": name if isinstance(name, str) and name else entry["project_id"],
        "color": color if isinstance(color, str) and re.fullmatch(r"#[0-9a-fA-F]{6}", color) else None,
        "created_at": entry.get("created_at") if isinstance(entry.get("created_at"), (int, float)) else None,
    }


def _read_raw(home: models.Store) -> list[Any]:
    """Every entry of the file as stored (unreadable ones included); [] when there is no file."""
    path = projects_file(store=home)
    try:
        found = read_regular_file(path, max_bytes=MAX_FILE_BYTES)
    except (OSError, UnsafeFile) as exc:
        log.error("cannot read %s: %s", path, exc)
        raise ProjectsUnreadable(
            f"{FILE_NAME} cannot be read ({exc.__class__.__name__}); it is left as it is"
        ) from exc
    if found is None:
        return []
    try:
        data = jsonio.loads(found[1])
    except ValueError as exc:
        data = exc
    if not isinstance(data, list):
        log.error("%s is not a JSON list; it is left as it is until repaired", path)
        raise ProjectsUnreadable(
            f"{FILE_NAME} is damaged (not a JSON list); it is left as it is until repaired"
        )
    for entry in data:
        if not _usable(entry):
            log.warning("%s: an entry without a usable project_id is skipped (kept in the file)", path)
    return data


def _write_raw(home: models.Store, entries: list[Any]) -> None:
    data = json.dumps(entries, indent=2, ensure_ascii=False).encode("utf-8")
    atomic.write_bytes_durable(projects_file(store=home), data)


def list_projects(*, store: models.Store | None = None) -> list[dict[str, Any]]:
    """The usable projects, oldest first, as the page shows them."""
    home = models.store(store)
    with home.projects_lock:
        return [_shown(entry) for entry in _read_raw(home) if _usable(entry)]


def get_project(project_id: Any, *, store: models.Store | None = None) -> dict[str, Any]:
    pid = clean_project_id(project_id)
    for project in list_projects(store=store):
        if project["project_id"] == pid:
            return project
    raise NotFound("Project not found")


def _check_name_free(entries: list[Any], name: str, but: str | None = None) -> None:
    for entry in entries:
        if (
            _usable(entry)
            and entry["project_id"] != but
            and str(entry.get("name", "")).lower() == name.lower()
        ):
            raise Conflict(f"A project named “{name}” exists already")


def create_project(name: Any, color: Any = None, *, store: models.Store | None = None) -> dict[str, Any]:
    name = clean_name(name)
    color = PALETTE[0] if color is None else clean_color(color)
    home = models.store(store)
    with home.projects_lock:
        entries = _read_raw(home)
        if sum(1 for entry in entries if _usable(entry)) >= MAX_PROJECTS:
            raise Conflict(f"At most {MAX_PROJECTS} projects")
        _check_name_free(entries, name)
        entry = {"project_id": uuid.uuid4().hex[:12], "name": name, "color": color, "created_at": time.time()}
        _write_raw(home, [*entries, entry])
    return _shown(entry)


def _find(entries: list[Any], pid: str) -> dict[str, Any]:
    for entry in entries:
        if _usable(entry) and entry["project_id"] == pid:
            return cast(dict[str, Any], entry)
    raise NotFound("Project not found")


def rename_project(
    project_id: Any, name: Any = None, color: Any = None, *, store: models.Store | None = None
) -> dict[str, Any]:
    """Change a project's name, its colour, or both (hermes-webui's rename also recolours)."""
    pid = clean_project_id(project_id)
    if name is None and color is None:
        raise BadRequest("name or color is required")
    new_name = None if name is None else clean_name(name)
    new_color = None if color is None else clean_color(color)
    home = models.store(store)
    with home.projects_lock:
        entries = _read_raw(home)
        entry = _find(entries, pid)
        if new_name is not None:
            _check_name_free(entries, new_name, but=pid)
        changed = dict(entry)
        if new_name is not None:
            changed["name"] = new_name
        if new_color is not None:
            changed["color"] = new_color
        _write_raw(home, [changed if item is entry else item for item in entries])
    return _shown(changed)


def remove_project(project_id: Any, *, store: models.Store | None = None) -> dict[str, Any]:
    """Take the project out of the list (its sessions are moved out first by ``api.services.project_ops``)."""
    pid = clean_project_id(project_id)
    home = models.store(store)
    with home.projects_lock:
        entries = _read_raw(home)
        entry = _find(entries, pid)
        _write_raw(home, [item for item in entries if item is not entry])
    return _shown(entry)

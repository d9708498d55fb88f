"""A session's workspace: the folder its terminal and file tools work in.

The default is the ``default_workspace`` setting, else the agent's configured ``terminal.cwd``, else the
person's home folder — never the server's own working directory — taking the first of them that lies
under the ``workspace_roots`` (else the first root). A folder the person chooses must exist, be a
folder, and lie under one of the roots once links are resolved; each turn checks it again, so a folder
replaced by a link after it was chosen does not take the turn out of the roots.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from api.rules.errors import BadRequest, Conflict
from api.store import config as _config
from api.store import models

PATH_MAX_CHARS = 4096
RECENT_MAX = 12


def roots() -> list[Path]:
    """The resolved ``workspace_roots`` folders (missing ones are left out)."""
    raw = str(_config.setting("workspace_roots") or "")
    out: list[Path] = []
    for part in raw.split(os.pathsep):
        if not part.strip():
            continue
        try:
            folder = Path(part.strip()).expanduser().resolve(strict=True)
        except (OSError, RuntimeError):
            continue
        if folder.is_dir() and folder not in out:
            out.append(folder)
    return out


def _inside(folder: Path, allowed: list[Path]) -> bool:
    return any(folder.is_relative_to(root) for root in allowed)


def default() -> str:
    """The workspace of a new (or imported) session: the first candidate that is a folder inside the roots."""
    allowed = roots()
    configured = _config.setting("default_workspace") or _config.agent_terminal_cwd()
    for candidate in (configured, str(Path.home())):
        if not candidate:
            continue
        try:
            folder = Path(candidate).expanduser().resolve(strict=True)
        except (OSError, RuntimeError):
            continue
        if folder.is_dir() and _inside(folder, allowed):
            return str(folder)
    return str(allowed[0]) if allowed else str(Path.home())


def choose(value: Any) -> str:
    """A folder the person typed or picked, resolved; ``BadRequest`` naming what is wrong with it."""
    if not isinstance(value, str) or not value.strip():
        raise BadRequest("workspace must be a non-empty folder path")
    if len(value) > PATH_MAX_CHARS or "\x00" in value:
        raise BadRequest("workspace is not a valid path")
    path = Path(value.strip()).expanduser()
    if not path.is_absolute():
        raise BadRequest("workspace must be an absolute path (or start with ~)")
    try:
        folder = path.resolve(strict=True)
    except FileNotFoundError:
        raise BadRequest("workspace does not exist") from None
    except (OSError, RuntimeError):
        raise BadRequest("workspace cannot be read (a link loop or no permission)") from None
    if not folder.is_dir():
        raise BadRequest("workspace is not a folder")
    if not _inside(folder, roots()):
        raise BadRequest("workspace is outside the allowed workspace roots")
    return str(folder)


def for_turn(session: models.Session) -> str:
    """The folder a turn of this session runs in, links resolved now; ``Conflict`` when it is no longer valid.

    Checked at every turn start: a folder replaced by a link (or moved) after it was chosen would otherwise
    take the agent's terminal and file tools out of the roots.
    """
    try:
        folder = Path(session.workspace or default()).resolve(strict=True)
    except FileNotFoundError:
        raise Conflict("This session's workspace folder no longer exists; choose another one.") from None
    except (OSError, RuntimeError):
        raise Conflict("This session's workspace folder cannot be read; choose another one.") from None
    if not folder.is_dir():
        raise Conflict("This session's workspace is no longer a folder; choose another one.")
    if not _inside(folder, roots()):
        raise Conflict(
            "This session's workspace is outside the allowed workspace roots (a link may point out of them);"
            " choose another one."
        )
    return str(folder)


def overview(*, store: models.Store | None = None) -> dict[str, Any]:
    """The default, the roots, and recently used workspaces (newest session of ``store``, the caller's app's,
    first) for the picker."""
    recent: list[str] = []
    for row in models.store(store).newest_first():
        folder = row.get("workspace")
        if isinstance(folder, str) and folder and folder not in recent and Path(folder).is_dir():
            recent.append(folder)
        if len(recent) >= RECENT_MAX:
            break
    return {"default": default(), "roots": [str(r) for r in roots()], "recent": recent}

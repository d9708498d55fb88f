"""The trash of a session in another execution environment, kept on that host: a deleted file or folder is
moved there, never out of it, and can be put back, as the local trash does (``workspace_files``).

The trash is ``$XDG_DATA_HOME/talaria/trash/<session id>`` on the host (``~/.local/share`` when unset),
outside the workspace so a deletion never shows in its listing or its git status. Each item is a folder
named by its time and a random part, holding ``item`` (what was deleted, moved whole with ``mv``) and
``origin`` (its path in the workspace). A restore resolves that path inside the workspace again and claims
it with ``mv -n``: something that took its place meanwhile is never replaced.
"""

from __future__ import annotations

import re
import shlex
import time
import uuid
from typing import Any

from api.rules import remote_output
from api.rules.errors import BadRequest, Conflict, NotFound
from api.services import environment_shell
from api.services.environment_shell import EXISTS, MISSING, UNWRITABLE, WORKSPACE_ITSELF, Where

_ITEM_ID = re.compile(r"[0-9]{1,20}-[0-9a-f]{8}")
_HELD = environment_shell.taken("h/item")


def _folder(sid: str) -> str:
    """Shell lines that set ``T``, the session's trash there (``sid`` is a checked session id)."""
    return f'T="${{XDG_DATA_HOME:-$HOME/.local/share}}/talaria/trash/"{shlex.quote(sid)}\n'


def delete(place: Where, sid: str, relative: Any) -> dict[str, Any]:
    """Move a file or folder of the workspace there into the session's trash there."""
    path = remote_output.checked_relative(relative)
    item_id = f"{int(time.time() * 1000)}-{uuid.uuid4().hex[:8]}"
    script = environment_shell.locate(path) + f'[ "$t" = "$w" ] && exit {WORKSPACE_ITSELF}\n'
    script += 'if [ "$w" = / ]; then r=${t#/}; else r=${t#"$w"/}; fi\n'
    script += _folder(sid) + f'h="$T"/{item_id}\nmkdir -p -- "$h" || exit {UNWRITABLE}\n'
    script += f'printf \'%s\' "$r" > "$h/origin" || exit {UNWRITABLE}\n'
    script += f'mv -T -- "$t" "$h/item" || {{ rm -rf -- "$h"; exit {UNWRITABLE}; }}\n'
    workspace, target, _rest = environment_shell.located(environment_shell.run(place, script))
    return {"trash_id": item_id, "path": remote_output.relative_to(workspace, target)}


def trash(place: Where, sid: str) -> dict[str, Any]:
    """What the session's trash there holds, newest first."""
    script = _folder(sid) + 'cd -- "$T" 2>/dev/null || exit 0\n'
    script += f'for h in *; do [ -d "$h" ] && [ -f "$h/origin" ] && {_HELD} || continue\n'
    script += "  printf '%s\\0' \"$h\"; cat -- \"$h/origin\"; printf '\\0'\ndone\n"
    records = remote_output.records(environment_shell.run(place, script))
    rows = [
        {"trash_id": item_id, "path": origin}
        for item_id, origin in zip(records[0::2], records[1::2], strict=False)
        if _ITEM_ID.fullmatch(item_id)
    ]
    rows.sort(key=lambda row: int(row["trash_id"].split("-")[0]), reverse=True)
    return {"items": rows}


def restore(place: Where, sid: str, item_id: Any) -> dict[str, Any]:
    """Put a deleted file or folder back where it was there; refused when something took its place."""
    if not isinstance(item_id, str) or not _ITEM_ID.fullmatch(item_id):
        raise BadRequest("trash_id must name an item of the trash")
    origin = next((row["path"] for row in trash(place, sid)["items"] if row["trash_id"] == item_id), None)
    if origin is None:
        raise NotFound("No such item in the trash")
    path = remote_output.checked_relative(origin)
    script = _folder(sid) + f'h="$T"/{item_id}\n{_HELD} || exit {MISSING}\n'
    script += environment_shell.locate(path, must_exist=False)
    script += f"{environment_shell.taken('t')} && exit {EXISTS}\n"
    script += f'mkdir -p -- "${{t%/*}}" || exit {UNWRITABLE}\n'
    script += f'mv -n -T -- "$h/item" "$t" 2>/dev/null\n{_HELD} && exit {EXISTS}\nrm -rf -- "$h"\n'
    refusal = Conflict(f"{path.rsplit('/', 1)[-1]} exists again; rename it first")
    workspace, target, _rest = environment_shell.run_claiming(place, script, refusal)
    return {"path": remote_output.relative_to(workspace, target)}


def empty_trash(place: Where, sid: str) -> dict[str, Any]:
    """Delete what the session's trash there holds, for good."""
    count = len(trash(place, sid)["items"])
    environment_shell.run(place, _folder(sid) + 'rm -rf -- "$T"\n')
    return {"emptied": count}

"""The files panel's writes in a session's execution environment, other than an edit (``remote_edit``): a new
file or folder, a rename, and new bytes under a free name (an upload, an attachment), each one script run
there (``api.services.environment_shell``) with the local rule.

Every path is checked, quoted and resolved there inside the session's folder as for a read. Nothing is
ever replaced: a new file is made with the shell's no-clobber, a folder with ``mkdir``, a rename with
``mv -n`` (and a name that appeared meanwhile is reported, the source left where it was), new bytes are
written to a temp file beside the target (sent base64 on standard input) and claimed with ``ln``, which
fails when the name exists; where the file system has no hard links, ``mv -n`` claims it instead.
"""

from __future__ import annotations

import base64
import shlex
from pathlib import PurePosixPath
from typing import Any

from api.rules import remote_output
from api.rules.errors import ApiError, BadRequest, Conflict, Forbidden
from api.services import environment_shell
from api.services.environment_shell import (
    EXISTS,
    INTO_ITSELF,
    MISSING,
    NOT_FOLDER,
    UNWRITABLE,
    WORKSPACE_ITSELF,
    Where,
)
from api.services.media import clean_name

_TAKEN = environment_shell.taken("t")


def _parent_must_exist() -> str:
    return f'd=${{t%/*}}; [ -n "$d" ] || d=/\n[ -d "$d" ] || exit {MISSING}\n'


def create(place: Where, relative: Any, kind: Any) -> dict[str, Any]:
    """A new empty file or folder there; an existing name is refused, never replaced."""
    path = remote_output.checked_relative(relative)
    name = clean_name(PurePosixPath(path).name)
    if kind not in ("file", "dir"):
        raise BadRequest('kind must be "file" or "dir"')
    make = 'mkdir -- "$t"' if kind == "dir" else '( set -C; : > "$t" )'
    script = environment_shell.locate(path, must_exist=False) + _parent_must_exist()
    script += f"{_TAKEN} && exit {EXISTS}\n"
    script += f"{make} 2>/dev/null || {{ {_TAKEN} && exit {EXISTS}; exit {UNWRITABLE}; }}\n"
    workspace, target, _rest = environment_shell.run_claiming(
        place, script, Conflict(f"{name} already exists")
    )
    return {"path": remote_output.relative_to(workspace, target), "type": kind}


def rename(place: Where, relative: Any, new_relative: Any) -> dict[str, Any]:
    """Rename or move a file or folder inside the workspace there; an existing target is refused."""
    source = remote_output.checked_relative(relative)
    destination = remote_output.checked_relative(new_relative)
    name = clean_name(PurePosixPath(destination).name)
    script = environment_shell.locate(source) + "s=$t\n"
    script += f'[ "$s" = "$w" ] && exit {WORKSPACE_ITSELF}\n'
    script += environment_shell.locate(destination, must_exist=False)
    script += f'case "$t" in "$s"|"$s"/*) exit {INTO_ITSELF};; esac\n'
    script += f"{_TAKEN} && exit {EXISTS}\n" + _parent_must_exist()
    script += 'mv -n -T -- "$s" "$t" 2>/dev/null\n'
    # ``mv -n`` exits 0 when it leaves an existing target alone: the source still there says so.
    script += f'if [ -e "$s" ] || [ -L "$s" ]; then {_TAKEN} && exit {EXISTS}; exit {UNWRITABLE}; fi\n'
    refusal = Conflict(f"{name} already exists")
    workspace, _source, rest = environment_shell.run_claiming(place, script, refusal)
    parts = rest.split(b"\0", 2)
    target = parts[1].decode("utf-8", "surrogateescape") if len(parts) > 2 else ""
    if not remote_output.inside(workspace, target):
        raise Forbidden("path is outside the session's workspace")
    return {"path": remote_output.relative_to(workspace, target)}


def write_new(
    place: Where, folder: Any, names: list[str], raw: bytes, *, make_folder: bool = False
) -> tuple[str, str]:
    """Write ``raw`` there into ``folder`` (relative; made first when ``make_folder``, never through a link)
    under the first of ``names`` that is free; ``(its path in the workspace, the name)``. All taken → 409."""
    path = remote_output.checked_relative(folder, allow_root=True)
    script = ""
    if make_folder and path:
        quoted = shlex.quote(path)
        script += f"[ -L {quoted} ] && exit {NOT_FOLDER}\n[ -d {quoted} ] || mkdir -p -- {quoted} || exit {UNWRITABLE}\n"
    script += environment_shell.locate(path) + f'[ -d "$t" ] || exit {NOT_FOLDER}\n'
    script += f'n=$(mktemp "$t/.talaria-upload.XXXXXX") || exit {UNWRITABLE}\nchmod 644 -- "$n"\n'
    # Only the whole file is ever claimed: a write cut short (a full disk) leaves a size other than the sent one.
    script += f'base64 -d > "$n" && [ "$(stat -c %s -- "$n")" = {len(raw)} ] || {{ rm -f -- "$n"; exit {UNWRITABLE}; }}\n'
    script += 'sync -- "$n" 2>/dev/null\n'
    script += "for c in " + " ".join(shlex.quote(name) for name in names) + "; do\n"
    script += (
        '  if ln -T -- "$n" "$t/$c" 2>/dev/null; then rm -f -- "$n"; printf \'%s\\0\' "$c"; exit 0; fi\n'
    )
    # ``ln`` fails on a taken name, and on a file system without hard links: there ``mv -n`` claims it.
    script += '  if [ ! -e "$t/$c" ] && [ ! -L "$t/$c" ]; then mv -n -T -- "$n" "$t/$c" 2>/dev/null\n'
    script += '    [ -e "$n" ] || { printf \'%s\\0\' "$c"; exit 0; }; fi\n'
    script += f'done\nrm -f -- "$n"\nexit {EXISTS}\n'
    refusal = Conflict(f"{names[0]} already exists in this folder", exists=True, name=names[0])
    stdin = base64.b64encode(raw).decode()
    workspace, target, rest = environment_shell.run_claiming(place, script, refusal, stdin)
    stored = remote_output.records(rest)[:1]
    if not stored or stored[0] not in names:
        raise ApiError("The environment's answer did not name the file it wrote", status=502)
    return remote_output.relative_to(workspace, f"{target}/{stored[0]}"), stored[0]


def files(place: Where, paths: list[str]) -> list[str]:
    """Each path checked there as a regular file inside the workspace; their paths in the workspace."""
    checked = [remote_output.checked_relative(path) for path in paths]
    script = "".join(
        environment_shell.locate(path) + f'[ -f "$t" ] || exit {environment_shell.NOT_FILE}\n'
        for path in checked
    )
    records = remote_output.records(environment_shell.run(place, script))
    found = []
    for workspace, target in zip(records[0::2], records[1::2], strict=True):
        if not remote_output.inside(workspace, target):
            raise Forbidden("path is outside the session's workspace")
        found.append(remote_output.relative_to(workspace, target))
    return found

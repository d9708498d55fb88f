"""A save from the files panel's editor for a session in another execution environment, written on that
host (``api.services.environment_shell``) with the local save's rule: the file must still be at the
version it was opened at (``""``: it must not exist), else 409 with both texts.

One script there checks the version (the same hash, ``sha256sum``) and writes the new bytes (sent base64 on
standard input, never on the command line) into a temp file beside the target, then renames it over the
target, so a reader there sees the old file or the new one. The path is checked, quoted and resolved there
inside the folder as for a read; a folder, FIFO or device is never written.
"""

from __future__ import annotations

import base64
import re
import shlex
from pathlib import PurePosixPath
from typing import Any

from api.agent import agent_memory
from api.rules import remote_output
from api.rules.errors import BadRequest, Conflict
from api.services import environment_shell, file_preview
from api.services.environment_shell import CHANGED, MISSING, NOT_FILE, UNREADABLE, UNWRITABLE, Where

_VERSION = re.compile(r"[0-9a-f]{0,64}")


def _script(path: str, base_version: str) -> str:
    return environment_shell.locate(path, must_exist=False) + (
        f'[ -d "$t" ] && exit {NOT_FILE}\n'
        'if [ -e "$t" ]; then\n'
        f'  [ -f "$t" ] || exit {NOT_FILE}\n'
        f'  v=$(sha256sum < "$t" | cut -c1-32) || exit {UNREADABLE}\n'
        "else v=; fi\n"
        f'if [ "$v" != {shlex.quote(base_version)} ]; then\n'
        # what is there now, after a mark that says whether a file is there at all
        f'  if [ -f "$t" ]; then printf \'E\\0\'; head -c {file_preview.PREVIEW_MAX + 1} -- "$t"; '
        f"else printf 'N\\0'; fi; exit {CHANGED}\n"
        "fi\n"
        'd=${t%/*}; [ -n "$d" ] || d=/\n'
        f'[ -d "$d" ] || exit {MISSING}\n'
        f'n=$(mktemp "$d/.talaria-save.XXXXXX") || exit {UNWRITABLE}\n'
        'if [ -e "$t" ]; then chmod --reference="$t" -- "$n"; else chmod 644 -- "$n"; fi\n'
        f'base64 -d > "$n" && mv -f -- "$n" "$t" || {{ rm -f -- "$n"; exit {UNWRITABLE}; }}\n'
    )


def save_file(place: Where, relative: Any, content: str, base_version: str) -> dict[str, Any]:
    """Replace a text file there with ``content`` if it is still at ``base_version``."""
    path = remote_output.checked_relative(relative)
    if not _VERSION.fullmatch(base_version):
        raise BadRequest("base_version must be the version the file was opened at")
    data = content.encode("utf-8")
    found, code = environment_shell.run_coded(
        place, _script(path, base_version), ok_codes=(0, CHANGED), stdin=base64.b64encode(data).decode()
    )
    workspace, target, current = environment_shell.located(found)
    name = PurePosixPath(target).name
    if code == CHANGED:
        there, _, current = current.partition(b"\0")
        now = current if there == b"E" else None
        raise Conflict(
            f"{name} changed since you opened it.",
            current={"content": current.decode("utf-8", "replace"), "version": agent_memory.version_of(now)},
            yours=content,
        )
    version = agent_memory.version_of(data)
    return {"path": remote_output.relative_to(workspace, target), "version": version, "size": len(data)}

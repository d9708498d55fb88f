"""Commands of the files panel in a session's execution environment: where a remote session's folder is,
and one script run there through the environment's own worker process.

The script runs through the live environment the session's turns use (``agent_calls.environment_command``
in that environment's worker: the agent's SSH master connection or container, made on the first call when
no turn made it yet), in the session's folder there (``environment_workspace``, else the backend's start
folder), and answers framed bytes and an exit code (``api.rules.remote_output``). Every path from the page
is checked as relative to that folder, quoted, resolved there with ``realpath`` and refused when it lands
outside the folder; a failure the panel tells apart is an exit code of the script. A host that cannot be
reached answers 502 with the same advice as a turn; the command and the call each have a deadline.
"""

from __future__ import annotations

import logging
import shlex
from dataclasses import dataclass
from typing import Any

from api.rules import remote_output
from api.rules.errors import ApiError, BadRequest, Conflict, Forbidden, NotFound
from api.services import environment_check, environment_workers, environments
from api.store import models, session_lookup

log = logging.getLogger("talaria.environment_shell")

COMMAND_S = 30  # what one command may take there
CALL_S = 60.0  # what the worker may take to answer, connection set-up included

# The script's exit codes for what the panel tells apart (ssh itself exits 255 on a failed connection).
NO_WORKSPACE = remote_output.NO_WORKSPACE
MISSING = 4
NOT_FOLDER = 5
NOT_FILE = 6
OUTSIDE = 7
UNREADABLE = 8
NOT_REPOSITORY = 9
CHANGED = 10
UNWRITABLE = 11
EXISTS = 12
WORKSPACE_ITSELF = 13  # asked to move or delete the workspace itself
INTO_ITSELF = 14  # asked to move a folder into itself
_SSH_FAILED = 255


@dataclass(frozen=True)
class Where:
    """A remote session's environment and its folder there, as the shell there reads it."""

    name: str
    entry: dict[str, Any]
    folder: str
    pools: environment_workers.EnvironmentPools | None = None  # the app's whose workers run the commands


def where(
    sid: str,
    *,
    store: models.Store | None = None,
    environment_pools: environment_workers.EnvironmentPools | None = None,
) -> Where | None:
    """The environment a session's files are in (the session of ``store``, its commands run by the workers of
    ``environment_pools``: the caller's app's), or None for a session on this machine; a remote one not
    confirmed (or gone) is refused as its turns are."""
    session = session_lookup.load_session(sid, store=store)
    found = environments.for_turn(session)
    if found is None:
        return None
    name, entry = found
    folder = environments.turn_workspace(session, entry) or environments.start_folder(entry)
    return Where(name, entry, remote_output.remote_path(folder), environment_pools)


def locate(relative: str, *, must_exist: bool = True) -> str:
    """Shell lines that set ``w`` (the workspace, resolved) and ``t`` (``relative`` resolved, links
    followed), stop the script when ``t`` is outside ``w``, and print both as the first two records."""
    flag = "-e" if must_exist else "-m"
    target = "." if relative == "" else shlex.quote(relative)
    return (
        f"w=$(pwd -P) || exit {NO_WORKSPACE}\n"
        # ``x`` keeps a name's trailing newlines from the command substitution's trimming.
        f"t=$(realpath {flag} -- {target} && printf x) || exit {MISSING}\n"
        "t=${t%?x}\n"
        f'[ "$w" = / ] || case "$t" in "$w"|"$w"/*) ;; *) exit {OUTSIDE};; esac\n'
        'printf \'%s\\0%s\\0\' "$w" "$t"\n'
    )


def _refusal(code: int, place: Where, text: str) -> ApiError:
    target = environments.target_of(place.entry)
    found: dict[int, ApiError] = {
        NO_WORKSPACE: NotFound(f"This session's workspace folder does not exist on {target}"),
        MISSING: NotFound("No such file or folder in the workspace"),
        NOT_FOLDER: BadRequest("path is not a folder"),
        NOT_FILE: Forbidden("This file is not opened here: not a regular file"),
        OUTSIDE: Forbidden("path is outside the session's workspace"),
        UNREADABLE: Forbidden("This file cannot be read"),
        NOT_REPOSITORY: NotFound("This workspace is not a git repository"),
        UNWRITABLE: Forbidden(f"The file cannot be written on {target}"),
        EXISTS: Conflict("A file or folder of that name already exists"),
        WORKSPACE_ITSELF: Forbidden("The workspace itself is not renamed or deleted here"),
        INTO_ITSELF: BadRequest("A folder cannot move into itself"),
    }
    return found.get(code) or BadRequest(
        text.strip()[:300] or f"the command failed on {target} (exit {code})"
    )


def run(place: Where, script: str, ok_codes: tuple[int, ...] = (0,), stdin: str | None = None) -> bytes:
    """The bytes ``script`` prints in the session's folder there (fed ``stdin``); another exit code than
    ``ok_codes`` is the error it stands for, and an unreachable host a 502 that says what to fix."""
    return run_coded(place, script, ok_codes, stdin)[0]


def run_coded(
    place: Where, script: str, ok_codes: tuple[int, ...] = (0,), stdin: str | None = None
) -> tuple[bytes, int]:
    """``run``, with the exit code (one of ``ok_codes``)."""
    command = remote_output.in_folder(place.folder, script)
    pool = environment_workers.pool_for(place.name, place.entry, pools=place.pools)
    args = {"command": command, "timeout": COMMAND_S, "stdin": stdin}
    try:
        answer = pool.call("environment_command", args, timeout=CALL_S)
    except ApiError as exc:
        if exc.status not in (502, 504):  # not the host's answer (the server is stopping)
            raise
        log.info("environment %s: a files command failed: %s", place.name, exc.message)
        message = exc.message if exc.status != 504 else f"no answer within {CALL_S:.0f} s (timed out)"
        raise ApiError(environment_check.unreachable(place.name, place.entry, message), status=502) from None
    output = str(answer.get("output") or "") if isinstance(answer, dict) else ""
    framed = remote_output.unframed(output)
    if framed is None:
        code = answer.get("returncode") if isinstance(answer, dict) else None
        if code == 124 or "timed out" in output.lower():
            output = output or f"no answer within {COMMAND_S} s (timed out)"
        raise ApiError(
            environment_check.unreachable(place.name, place.entry, output or f"exit {code}"), status=502
        )
    data, code = framed
    if code == _SSH_FAILED:
        raise ApiError(environment_check.unreachable(place.name, place.entry, output), status=502)
    if code not in ok_codes:
        raise _refusal(code, place, data.decode("utf-8", "replace"))
    return data, code


def taken(variable: str) -> str:
    """A shell test: the path in ``variable`` holds something (a dangling link included)."""
    return f'{{ [ -e "${variable}" ] || [ -L "${variable}" ]; }}'


def run_claiming(
    place: Where, script: str, refusal: Conflict, stdin: str | None = None
) -> tuple[str, str, bytes]:
    """``located`` of a script that began with ``locate`` and exits ``EXISTS`` when the name it would claim is
    taken, which is ``refusal``."""
    found, code = run_coded(place, script, (0, EXISTS), stdin)
    if code == EXISTS:
        raise refusal
    return located(found)


def located(data: bytes) -> tuple[str, str, bytes]:
    """``(workspace, target, the rest)`` of the output of a script that began with ``locate``; a target
    outside the workspace is refused here too."""
    parts = data.split(b"\0", 2)
    if len(parts) < 3:
        raise ApiError("The environment's answer was cut short", status=502)
    workspace, target = (part.decode("utf-8", "surrogateescape") for part in parts[:2])
    if not remote_output.inside(workspace, target):
        raise Forbidden("path is outside the session's workspace")
    return workspace, target, parts[2]

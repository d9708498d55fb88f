"""Running git for the files panel: read-only (``--no-optional-locks``, no pager, no external diff or text
conversion, no prompt), with a bare environment, under a deadline."""

from __future__ import annotations

import subprocess
from pathlib import Path

from api.rules.errors import BadRequest, ServiceUnavailable

TIMEOUT_S = 10.0
_ENV = {"GIT_PAGER": "cat", "GIT_TERMINAL_PROMPT": "0", "PATH": "/usr/bin:/bin", "LC_ALL": "C"}


def run_git(folder: Path, *args: str, stdin: bytes | None = None, ok_codes: tuple[int, ...] = (0,)) -> str:
    """git's output in ``folder``; another exit code than ``ok_codes`` is a 400 with git's own words."""
    command = ["git", "--no-optional-locks", "-c", "core.quotepath=off", "-c", "diff.external="]
    try:
        done = subprocess.run(
            [*command, "-C", str(folder), *args],
            input=stdin,
            capture_output=True,
            timeout=TIMEOUT_S,
            check=False,
            env=_ENV,
        )
    except FileNotFoundError:
        raise ServiceUnavailable("git is not installed on the server") from None
    except subprocess.TimeoutExpired:
        raise ServiceUnavailable(f"git did not answer within {TIMEOUT_S:g} s") from None
    if done.returncode not in ok_codes:
        raise BadRequest(done.stderr.decode("utf-8", "replace").strip()[:300] or "git failed")
    return done.stdout.decode("utf-8", "replace")

"""The changes view of a session in another execution environment: ``git status`` and the diff against
HEAD of its work tree, run on that host (``api.services.environment_shell``) as on this machine: read-only
(``--no-optional-locks``, no pager, no external diff or text conversion, no prompt), the output cut there."""

from __future__ import annotations

from typing import Any

from api.rules import git_porcelain, remote_output
from api.services import environment_shell
from api.services.environment_shell import NOT_REPOSITORY, Where

_SIGPIPE = 141  # git's exit when ``head`` stopped reading: the output was cut, not failed
_GIT = (
    "export GIT_PAGER=cat GIT_TERMINAL_PROMPT=0 LC_ALL=C\n"
    'g() { git --no-optional-locks -c core.quotepath=off -c diff.external= "$@"; }\n'
    f'[ "$(g rev-parse --is-inside-work-tree 2>/dev/null)" = true ] || exit {NOT_REPOSITORY}\n'
)
_STATUS_BYTES = 4 * 1024 * 1024


def status(place: Where) -> dict[str, Any]:
    """``{branch, entries, truncated}`` of the work tree there, against HEAD."""
    script = _GIT + "g rev-parse --abbrev-ref HEAD 2>&1 | head -c 256; printf '\\0'\n"
    script += f"g status --porcelain=v1 -z --untracked-files=all | head -c {_STATUS_BYTES}\n"
    branch, _, raw = environment_shell.run(place, script).partition(b"\0")
    found = git_porcelain.entries(raw.decode("utf-8", "surrogateescape"))
    return {"branch": branch.decode("utf-8", "replace").strip(), **found}


def diff(place: Where, relative: Any = None) -> dict[str, Any]:
    """The work tree there against HEAD, of one file (resolved inside the workspace) or all; bounded."""
    script = _GIT
    command = "g diff --no-color --no-ext-diff --no-textconv HEAD"
    if relative not in (None, ""):
        path = remote_output.checked_relative(relative)
        script += environment_shell.locate(path, must_exist=False)
        script += 'p=${t#"$w"/}; [ "$t" = "$w" ] && p=.\n'
        command += ' -- "$p"'
    script += f'{command} 2>&1 | head -c {git_porcelain.DIFF_MAX_CHARS + 1}; exit "${{PIPESTATUS[0]}}"\n'
    data = environment_shell.run(place, script, ok_codes=(0, _SIGPIPE))
    if relative not in (None, ""):
        data = environment_shell.located(data)[2]
    text = data.decode("utf-8", "replace")
    limit = git_porcelain.DIFF_MAX_CHARS
    return {"diff": text[:limit], "truncated": len(text) > limit}

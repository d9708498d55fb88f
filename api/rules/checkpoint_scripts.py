"""The checkpoint store of a remote session's workspace, kept on its host: the shell scripts that snapshot,
list, compare and restore it there, as text (run by the environment's worker before a turn's first write,
and by the changes view through ``api.services.environment_shell``).

The agent's ``CheckpointManager`` snapshots folders of its own machine only, so a host keeps a store of its
own, built the way the agent builds its: one bare git repository at
``$XDG_DATA_HOME/talaria/checkpoints/store`` (``~/.local/share`` when unset), outside every workspace, a ref
and an index per checkpointed folder (``refs/talaria/<key>``, the key the first 16 hex digits of git's hash
of the folder's resolved path), git's own configuration files left unread, the agent's list of excluded
folders, and its bounds: the newest ``snapshots`` checkpoints per folder, files over ``file_mb`` left out,
no snapshot of a folder of more than ``files`` files, of ``/`` or of the home folder, and, past ``total_mb``,
every other folder cut to its newest checkpoint; what a cut leaves unreachable is collected once it is an hour
old, so a restore or an undo begun before the cut still finds its checkpoint. Unlike the agent's, a checkpoint's date is this machine's
clock (the turn spans are this machine's times) and survives the cut, and a folder's first checkpoint is
taken even when it is empty (so a turn that creates the first files has a state before it). Snapshots and
restores of one host take turns under ``flock`` where the host has it.

Every script runs in the workspace (its caller's ``cd``); a commit named by the page is checked as
hexadecimal before it reaches a script, and paths travel on standard input, base64-encoded and
NUL-separated, never on the command line."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from api.rules.checkpoint_records import is_commit_hash
from api.rules.remote_output import NO_WORKSPACE

# Exit codes the caller tells apart (the files panel's shell codes run 3–14; ssh's own failure is 255).
NO_GIT = 20  # git is not installed there
NO_STORE = 21  # no checkpoint was ever taken on that host
NO_COMMIT = 22  # the store holds no such checkpoint
TOO_BROAD = 23  # the folder is / or the home folder
TOO_MANY = 24  # the folder holds more files than a snapshot takes
GIT_FAILED = 25
UNWRITABLE = 26  # the store's folder cannot be made or written

REASON_MAX_CHARS = 200
DIFF_MAX_BYTES = 4 * 1024 * 1024  # what one file's diff may bring back

# The agent's own excludes (``tools.checkpoint_manager.DEFAULT_EXCLUDES``), kept here as the host has no agent.
EXCLUDES = (
    "node_modules/",
    "dist/",
    "build/",
    ".env",
    ".env.*",
    ".env.local",
    ".env.*.local",
    "__pycache__/",
    "*.pyc",
    "*.pyo",
    ".DS_Store",
    "*.log",
    ".cache/",
    ".next/",
    ".nuxt/",
    "coverage/",
    ".pytest_cache/",
    ".venv/",
    "venv/",
    ".git/",
)


@dataclass(frozen=True)
class Limits:
    """How much a store keeps: the agent's ``checkpoints:`` settings and its file-count guard."""

    snapshots: int = 20
    file_mb: int = 10
    total_mb: int = 500
    files: int = 50_000


# Sets w (the workspace, resolved), S (the store), k and R (the folder's key and ref), git's environment.
_PRELUDE = f"""export LC_ALL=C GIT_CONFIG_GLOBAL=/dev/null GIT_CONFIG_SYSTEM=/dev/null GIT_CONFIG_NOSYSTEM=1
export GIT_TERMINAL_PROMPT=0 GIT_LITERAL_PATHSPECS=1 GIT_PAGER=cat GIT_OPTIONAL_LOCKS=0
unset GIT_NAMESPACE GIT_ALTERNATE_OBJECT_DIRECTORIES GIT_OBJECT_DIRECTORY GIT_COMMON_DIR GIT_DIR GIT_WORK_TREE
command -v git >/dev/null 2>&1 || exit {NO_GIT}
w=$(pwd -P) || exit {NO_WORKSPACE}
B="${{XDG_DATA_HOME:-$HOME/.local/share}}/talaria/checkpoints"
S="$B/store"
k=$(cd / && printf '%s' "$w" | git hash-object --stdin --no-filters) || exit {GIT_FAILED}
k=${{k:0:16}}
R=refs/talaria/$k
export GIT_DIR="$S" GIT_WORK_TREE="$w" GIT_INDEX_FILE="$S/indexes/$k"
"""

_NEEDS_STORE = f'[ -f "$S/HEAD" ] || exit {NO_STORE}\n'


def _stage(index: str, file_mb: int) -> str:
    """Lines that stage the folder now into ``index`` (a shell word), files over ``file_mb`` left out (0:
    none)."""
    staged = f"GIT_INDEX_FILE={index} git add -A --ignore-errors . >/dev/null 2>&1\n"
    if file_mb <= 0:
        return staged
    return staged + (
        f"find . -xdev -name .git -prune -o -type f -size +{file_mb * 1024}k -exec printf '%s\\0' {{}} + "
        f"2>/dev/null | GIT_INDEX_FILE={index} git rm -r -q --cached --ignore-unmatch "
        "--pathspec-from-file=- --pathspec-file-nul >/dev/null 2>&1\n"
    )


def _dated(variable: str) -> str:
    return f'GIT_AUTHOR_DATE="${variable} +0000" GIT_COMMITTER_DATE="${variable} +0000"'


def snapshot(reason: str, at: int, limits: Limits) -> str:
    """A checkpoint of the workspace now, dated ``at`` (unix seconds); prints its hash. None is added when
    nothing changed since the folder's newest, which it prints then."""
    message = shlex.quote(" ".join(reason.split())[:REASON_MAX_CHARS] or "checkpoint")
    excludes = " ".join(shlex.quote(pattern) for pattern in EXCLUDES)
    return (
        _PRELUDE
        + f"""h=$(cd ~ 2>/dev/null && pwd -P)
if [ "$w" = / ] || [ "$w" = "$h" ]; then exit {TOO_BROAD}; fi
mkdir -p -- "$B" 2>/dev/null || exit {UNWRITABLE}
exec 9>>"$B/lock" || exit {UNWRITABLE}
if command -v flock >/dev/null 2>&1; then flock -w 60 9; fi
if [ ! -f "$S/HEAD" ]; then
  env -u GIT_DIR -u GIT_WORK_TREE -u GIT_INDEX_FILE git init -q --bare "$S" >/dev/null 2>&1 || exit {UNWRITABLE}
  git config user.email talaria@localhost && git config user.name 'Talaria checkpoint' || exit {GIT_FAILED}
  git config commit.gpgsign false && git config gc.auto 0 && git config core.quotepath off || exit {GIT_FAILED}
  printf '%s\\n' {excludes} > "$S/info/exclude"
fi
mkdir -p -- "$S/indexes" "$S/projects" || exit {UNWRITABLE}
printf '%s' "$w" > "$S/projects/$k"
n=$(find . -xdev -name .git -prune -o -print 2>/dev/null | head -n {limits.files + 1} | wc -l)
[ "$n" -gt {limits.files} ] && exit {TOO_MANY}
tip=$(git rev-parse -q --verify "$R^{{commit}}" 2>/dev/null)
if [ -n "$tip" ]; then git read-tree "$tip" || exit {GIT_FAILED}; else rm -f -- "$GIT_INDEX_FILE"; fi
"""
        + _stage('"$GIT_INDEX_FILE"', limits.file_mb)
        + f"""if [ -n "$tip" ] && git diff-index --cached --quiet "$tip" -- 2>/dev/null; then printf '%s' "$tip"; exit 0; fi
t=$(git write-tree) || exit {GIT_FAILED}
d={int(at)}
c=$({_dated("d")} git commit-tree "$t" ${{tip:+-p "$tip"}} -m {message}) || exit {GIT_FAILED}
git update-ref "$R" "$c" $tip || exit {GIT_FAILED}
cut=
if [ "$(git rev-list --count "$R")" -gt {limits.snapshots} ]; then
  p=
  while read -r t d m; do
    p=$({_dated("d")} git commit-tree "$t" ${{p:+-p "$p"}} -m "$m") || exit {GIT_FAILED}
  done < <(git log -n {limits.snapshots} --reverse --format='%T %ct %s' "$R")
  git update-ref "$R" "$p" || exit {GIT_FAILED}
  c=$p
  cut=1
fi
if [ {limits.total_mb} -gt 0 ] && [ "$(du -sk "$S" | cut -f1)" -gt {limits.total_mb * 1024} ]; then
  for r in $(git for-each-ref --format='%(refname)' refs/talaria/); do
    [ "$r" = "$R" ] && continue
    read -r t d m < <(git log -1 --format='%T %ct %s' "$r")
    n=$({_dated("d")} git commit-tree "$t" -m "$m") && git update-ref "$r" "$n"
  done
  cut=1
fi
if [ -n "$cut" ]; then git reflog expire --expire=now --all; git gc --prune=1.hour.ago --quiet; fi >/dev/null 2>&1
printf '%s' "$c"
"""
    )


def history() -> str:
    """Prints the workspace (resolved) and its key, then its checkpoints oldest first (``%H|%ct|%s``), each
    NUL-terminated (none before the first snapshot there)."""
    return (
        _PRELUDE
        + """printf '%s\\0%s\\0' "$w" "$k"
[ -f "$S/HEAD" ] || exit 0
git log -z --reverse --format='%H|%ct|%s' "$R" -- 2>/dev/null
exit 0
"""
    )


def _commit(value: str) -> str:
    if not is_commit_hash(value):
        raise ValueError(f"not a commit hash: {value!r}")
    return value


def _scratch_now(file_mb: int) -> str:
    """Lines that stage the folder now into a scratch index ``N`` (from a copy of the folder's own, whose file
    stats spare rehashing what did not change), removed when the script ends."""
    return (
        'N=$(mktemp "${TMPDIR:-/tmp}/talaria-index.XXXXXX") || exit '
        f"{UNWRITABLE}\ntrap 'rm -f -- \"$N\"' EXIT\n"
        '[ -f "$GIT_INDEX_FILE" ] && cp -- "$GIT_INDEX_FILE" "$N"\n'
    ) + _stage('"$N"', file_mb)


def _compared(start: str, end: str | None) -> str:
    """``git diff`` arguments from ``start`` to ``end``, or to the scratch index ``N`` (now)."""
    if end is not None:
        return f"{_commit(start)} {_commit(end)}"
    return f"--cached {_commit(start)}"


def changes(ranges: Sequence[tuple[str, str | None]], file_mb: int) -> str:
    """For each ``(start, end)`` (``end`` None: the folder now), one line: base64 of git's
    ``diff --raw --numstat -z`` between them."""
    script = _PRELUDE + _NEEDS_STORE
    if any(end is None for _start, end in ranges):
        script += _scratch_now(file_mb)
    for start, end in ranges:
        index = "" if end is not None else 'GIT_INDEX_FILE="$N" '
        script += (
            f"{index}git diff --raw --numstat -z --no-renames --no-color {_compared(start, end)} -- 2>/dev/null"
            " | base64 | tr -d '\\n'; echo\n"
        )
    return script


def diff(start: str, end: str | None, path: str | None, file_mb: int) -> str:
    """The unified diff from ``start`` to ``end`` (None: now) of one file, or of every file when ``path`` is
    None; its first ``DIFF_MAX_BYTES``."""
    script = _PRELUDE + _NEEDS_STORE + (_scratch_now(file_mb) if end is None else "")
    index = "" if end is not None else 'GIT_INDEX_FILE="$N" '
    only = f" -- {shlex.quote(path)}" if path is not None else ""
    return script + (
        f"{index}git diff --no-renames --no-color --no-ext-diff --no-textconv {_compared(start, end)}{only} "
        f"2>/dev/null | head -c {DIFF_MAX_BYTES}\n"
    )


def has_commit(commit: str) -> str:
    """Exits 0 when the store holds ``commit``, ``NO_COMMIT`` when not."""
    return (
        _PRELUDE
        + _NEEDS_STORE
        + f'git cat-file -e "{_commit(commit)}^{{commit}}" 2>/dev/null || exit {NO_COMMIT}\n'
    )


def restore(commit: str) -> str:
    """Puts the paths on standard input (base64 of NUL-separated paths) back as ``commit`` holds them: a
    file it holds is written, one it does not hold removed (with the folders that leaves empty); a path in
    neither the checkpoint nor the folder now is left alone. Prints how many paths it put back."""
    commit = _commit(commit)
    return (
        _PRELUDE
        + _NEEDS_STORE
        + f"""git cat-file -e "{commit}^{{commit}}" 2>/dev/null || exit {NO_COMMIT}
exec 9>>"$B/lock" || exit {UNWRITABLE}
if command -v flock >/dev/null 2>&1; then flock -w 60 9; fi
L=$(mktemp "${{TMPDIR:-/tmp}}/talaria-paths.XXXXXX") || exit {UNWRITABLE}
M="$L.known"
trap 'rm -f -- "$L" "$M"' EXIT
base64 -d > "$L" || exit {GIT_FAILED}
while IFS= read -r -d '' p; do {{ [ -e "$p" ] || [ -L "$p" ]; }} && printf '%s\\0' "$p"; done < "$L" |
  xargs -0 -r git add -A --ignore-errors -- >/dev/null 2>&1
xargs -0 -r git ls-files -z --with-tree={commit} -- < "$L" > "$M" 2>/dev/null || exit {GIT_FAILED}
if [ -s "$M" ]; then
  git restore -q --source={commit} --staged --worktree --pathspec-from-file="$M" --pathspec-file-nul || exit {GIT_FAILED}
fi
tr -cd '\\0' < "$M" | wc -c
"""
    )


def snapshot_then_restore(reason: str, at: int, limits: Limits, commit: str) -> str:
    """``snapshot`` of the workspace now, then ``restore`` of the paths on standard input from ``commit``, in
    one command: prints the snapshot's hash and a NUL, then the count restored. A failed snapshot restores
    nothing (its exit code is the script's)."""
    restoring = restore(commit)
    return f"c=$( ( {snapshot(reason, at, limits)}\n) </dev/null ) || exit $?\nprintf '%s\\0' \"$c\"\n( {restoring}\n)\n"

"""What each turn of a session changed in its workspace, from its checkpoints: the agent's own for a workspace
on this machine, the store kept on the host for a session in another execution environment
(``api.services.checkpoint_keepers``).

The agent checkpoints a folder before the first file change of each round of tool calls, so a turn's
changes run from the first checkpoint taken during the turn to the next checkpoint taken after it (a later
turn's, or the snapshot a restore keeps), or to the workspace now for the latest. A checkpoint belongs to
the turn whose time span holds its commit time (git keeps whole seconds: the span starts at the user row's
second and ends before the next user row's; once the agent rebuilds a folder's history past its limit, only
the newest checkpoint keeps a true time). A turn's files are listed with one git call per checkpointed
folder (on a host, every range of every turn in one command); restoring a turn puts those files back as they were before it, after the agent's snapshot of the
state now, which the undo restores the same files to."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from api.agent import checkpoint_store, turn_journal
from api.agent.checkpoint_store import Project, Range
from api.rules.checkpoint_records import FileChange, Point, is_commit_hash
from api.rules.errors import BadRequest, Conflict, NotFound
from api.services import checkpoint_keepers, environment_workers
from api.services.checkpoint_keepers import Keeper
from api.store import models, session_lookup

DIFF_MAX_LINES = 3_000  # a longer diff is cut at this many lines, and the answer says so
DIFF_MAX_CHARS = 400_000
_ROLLBACK = "pre-rollback"


@dataclass(frozen=True)
class TurnSpan:
    turn: int  # the index of the turn's user row in the transcript
    start: float
    end: float  # the last row's time (infinite while the turn runs)
    next_start: float | None


def spans(messages: list[Any], running: bool) -> list[TurnSpan]:
    """Each turn's time span, from its rows' timestamps (a turn whose user row has none is left out)."""
    users = [i for i, row in enumerate(messages) if isinstance(row, dict) and row.get("role") == "user"]
    out = []
    for n, i in enumerate(users):
        stop = users[n + 1] if n + 1 < len(users) else len(messages)
        times = [_time(row) for row in messages[i:stop]]
        start = times[0]
        if start is None:
            continue
        last = n + 1 == len(users)
        end = math.inf if last and running else max(t for t in times if t is not None)
        next_start = _time(messages[users[n + 1]]) if not last else None
        out.append(TurnSpan(i, start, end, next_start))
    return out


def _time(row: Any) -> float | None:
    value = row.get("timestamp") if isinstance(row, dict) else None
    return float(value) if isinstance(value, int | float) and math.isfinite(value) else None


def turn_range(span: TurnSpan, history: list[Point]) -> tuple[str, str | None] | None:
    """The checkpoints a turn's changes run between (``None`` for the end: now), or None when the agent
    took none during the turn."""
    inside = [
        j
        for j, point in enumerate(history)
        if math.floor(span.start) <= point.at <= span.end
        and (span.next_start is None or point.at < math.floor(span.next_start))
        and not point.reason.startswith(_ROLLBACK)  # a person's restore is never a turn's, however soon
    ]
    if not inside:
        return None
    after = inside[-1] + 1
    return history[inside[0]].hash, history[after].hash if after < len(history) else None


def _turn_number(value: Any) -> int:
    if isinstance(value, str) and value.isdigit() and len(value) < 10:
        return int(value)
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    raise BadRequest("turn must be the index of the turn's user message")


Pools = environment_workers.EnvironmentPools


@dataclass(frozen=True)
class _Session:
    keeper: Keeper
    spans: list[TurnSpan]


def _opened(
    sid: str, store: models.Store | None, turns: turn_journal.LiveTurns | None, pools: Pools | None
) -> _Session:
    session = session_lookup.load_session(sid, store=store)
    keeper = checkpoint_keepers.keeper_for(sid, store=store, environment_pools=pools)
    running = turn_journal.live_turn_for(sid, turns=turns) is not None
    return _Session(keeper, spans(list(getattr(session, "messages", None) or []), running))


def _ranges(histories: dict[Project, list[Point]], span: TurnSpan) -> list[Range]:
    found = []
    for project, history in histories.items():
        bounds = turn_range(span, history)
        if bounds:
            found.append(Range(project, *bounds))
    return found


def _turn_ranges(
    sid: str, turn: Any, store: models.Store | None, turns: turn_journal.LiveTurns | None, pools: Pools | None
) -> tuple[Keeper, list[Range]]:
    number = _turn_number(turn)
    opened = _opened(sid, store, turns, pools)
    span = next((s for s in opened.spans if s.turn == number), None)
    if span is None:
        raise NotFound("No such turn in this session")
    return opened.keeper, _ranges(opened.keeper.histories(), span)


Rows = list[tuple[Range, FileChange]]


def _files_of_each(keeper: Keeper, groups: Sequence[list[Range]]) -> list[Rows]:
    """Each group's changed files, sorted by path (a path listed once per group), from one call to the
    keeper for every range of every group."""
    everyone = list(dict.fromkeys(part for group in groups for part in group))
    found = dict(zip(everyone, keeper.changes(everyone), strict=True))
    answers = []
    for group in groups:
        rows: dict[str, tuple[Range, FileChange]] = {}
        for part in group:
            for change in found[part]:
                rows.setdefault(_full(part.project, change.path), (part, change))
        answers.append([rows[path] for path in sorted(rows)])
    return answers


def _full(project: Project, path: str) -> str:
    return f"{project.prefix}/{path}" if project.prefix else path


def _totals(rows: Rows) -> dict[str, int]:
    return {
        "files_changed": len(rows),
        "insertions": sum(change.insertions for _part, change in rows),
        "deletions": sum(change.deletions for _part, change in rows),
    }


def session_turns(
    sid: str,
    *,
    store: models.Store | None = None,
    turns: turn_journal.LiveTurns | None = None,
    environment_pools: Pools | None = None,
) -> dict[str, Any]:
    """``{turns: [{turn, files_changed, insertions, deletions}]}``: every turn that changed files."""
    opened = _opened(sid, store, turns, environment_pools)
    histories = opened.keeper.histories()
    groups = [_ranges(histories, span) for span in opened.spans]
    changed = []
    for span, rows in zip(opened.spans, _files_of_each(opened.keeper, groups), strict=True):
        if rows:
            changed.append({"turn": span.turn, **_totals(rows)})
    return {"turns": changed}


def turn_files(
    sid: str,
    turn: Any,
    *,
    store: models.Store | None = None,
    turns: turn_journal.LiveTurns | None = None,
    environment_pools: Pools | None = None,
) -> dict[str, Any]:
    """``{turn, files: [{path, status, insertions, deletions, binary}], files_changed, insertions,
    deletions, truncated}``: the files one turn changed (the list cut at ``FILES_MAX``, the counts whole)."""
    keeper, ranges = _turn_ranges(sid, turn, store, turns, environment_pools)
    (rows,) = _files_of_each(keeper, [ranges])
    files = [
        {
            "path": _full(part.project, change.path),
            "status": change.status,
            "insertions": change.insertions,
            "deletions": change.deletions,
            "binary": change.binary,
        }
        for part, change in rows[: checkpoint_store.FILES_MAX]
    ]
    truncated = len(rows) > checkpoint_store.FILES_MAX
    return {"turn": _turn_number(turn), "files": files, **_totals(rows), "truncated": truncated}


def turn_diff(
    sid: str,
    turn: Any,
    path: Any,
    *,
    store: models.Store | None = None,
    turns: turn_journal.LiveTurns | None = None,
    environment_pools: Pools | None = None,
) -> dict[str, Any]:
    """``{turn, path, diff, lines, truncated}``: one file's diff in the turn, cut at ``DIFF_MAX_LINES``."""
    keeper, ranges = _turn_ranges(sid, turn, store, turns, environment_pools)
    keeper.check_path(path)
    (rows,) = _files_of_each(keeper, [ranges])
    for part, change in rows:
        if _full(part.project, change.path) == path:
            text = keeper.file_diff(part, change.path)
            lines = text.split("\n")
            kept = "\n".join(lines[:DIFF_MAX_LINES])[:DIFF_MAX_CHARS]
            cut = len(lines) > DIFF_MAX_LINES or len(kept) < len("\n".join(lines[:DIFF_MAX_LINES]))
            return {
                "turn": _turn_number(turn),
                "path": path,
                "diff": kept,
                "lines": len(lines),
                "truncated": cut,
                "max_lines": DIFF_MAX_LINES,
            }
    raise NotFound("This turn did not change that file")


def _refuse_while_running(sid: str, turns: turn_journal.LiveTurns | None) -> None:
    if turn_journal.live_turn_for(sid, turns=turns) is not None:
        raise Conflict("A turn is running in this session: restore when it has ended")


def _put_back(keeper: Keeper, plan: list[tuple[Range, str]], rows: Rows, why: str) -> dict[str, Any]:
    """Each folder's files of the turn as ``commit`` holds them, after a snapshot of the state now (a reason
    starting "pre-rollback", which never starts a turn): ``{restored, undo}``."""
    undo, restored = [], 0
    for part, commit in plan:
        paths = [change.path for owner, change in rows if owner is part]
        source = keeper.pinned(part.project, commit)
        kept, count = keeper.put_back(
            part.project, source, paths, f"{_ROLLBACK} snapshot ({why} {commit[:8]})"
        )
        restored += count
        undo.append({"folder": part.project.prefix, "hash": kept})
    return {"restored": restored, "undo": undo}


def restore_turn(
    sid: str,
    turn: Any,
    *,
    store: models.Store | None = None,
    turns: turn_journal.LiveTurns | None = None,
    environment_pools: Pools | None = None,
) -> dict[str, Any]:
    """Puts every file the turn changed back as it was before the turn (files it added are removed). The
    state now is checkpointed first; ``undo`` names those checkpoints, one per folder."""
    _refuse_while_running(sid, turns)
    keeper, ranges = _turn_ranges(sid, turn, store, turns, environment_pools)
    (rows,) = _files_of_each(keeper, [ranges])
    if not rows:
        raise NotFound("This turn changed no files")
    plan = [(part, part.start) for part in ranges if any(owner is part for owner, _change in rows)]
    return {"turn": _turn_number(turn), **_put_back(keeper, plan, rows, "restoring a turn to")}


def undo_restore(
    sid: str,
    turn: Any,
    undo: Any,
    *,
    store: models.Store | None = None,
    turns: turn_journal.LiveTurns | None = None,
    environment_pools: Pools | None = None,
) -> dict[str, Any]:
    """Puts the turn's files back as the snapshots ``undo`` names hold them (the state before the restore);
    itself undoable the same way."""
    _refuse_while_running(sid, turns)
    if not isinstance(undo, list) or not undo or len(undo) > 100:
        raise BadRequest("undo must be the list a turn's restore answered")
    keeper, ranges = _turn_ranges(sid, turn, store, turns, environment_pools)
    (rows,) = _files_of_each(keeper, [ranges])
    plan = []  # every item checked before any file is touched
    for item in undo:
        folder, commit = (item.get("folder"), item.get("hash")) if isinstance(item, dict) else (None, None)
        if not is_commit_hash(commit):
            raise BadRequest("undo names a checkpoint by its hash (hexadecimal)")
        part = next((r for r in ranges if r.project.prefix == folder), None)
        if part is None:
            raise NotFound("This turn changed nothing in that folder")
        if not keeper.has_commit(part.project, commit):
            raise NotFound("No such checkpoint")
        plan.append((part, commit))
    return {"turn": _turn_number(turn), **_put_back(keeper, plan, rows, "undoing a restore to")}

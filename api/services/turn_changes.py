"""What each turn of a session changed in its workspace, from the agent's own checkpoints.

The agent checkpoints a folder before the first file change of each round of tool calls, so a turn's
changes run from the first checkpoint taken during the turn to the next checkpoint taken after it (a later
turn's, or the snapshot a restore keeps), or to the workspace now for the latest. A checkpoint belongs to
the turn whose time span holds its commit time (git keeps whole seconds: the span starts at the user row's
second and ends before the next user row's; once the agent rebuilds a folder's history past its limit, only
the newest checkpoint keeps a true time). A turn's files are listed with one git call per checkpointed
folder; restoring a turn puts those files back as they were before it, after the agent's snapshot of the
state now, which the undo restores the same files to."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from api.agent import checkpoint_store, turn_journal
from api.agent.checkpoint_store import FileChange, Point, Project
from api.rules.errors import BadRequest, Conflict, NotFound
from api.services import media
from api.store import models, session_lookup

DIFF_MAX_LINES = 3_000  # a longer diff is cut at this many lines, and the answer says so
DIFF_MAX_CHARS = 400_000
_ROLLBACK = "pre-rollback"
_HEX = set("0123456789abcdef")


@dataclass(frozen=True)
class TurnSpan:
    turn: int  # the index of the turn's user row in the transcript
    start: float
    end: float  # the last row's time (infinite while the turn runs)
    next_start: float | None


@dataclass(frozen=True)
class Range:
    project: Project
    start: str
    end: str | None  # None: the folder now


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


def _session_spans(
    sid: str, store: models.Store | None, turns: turn_journal.LiveTurns | None
) -> tuple[Any, list[TurnSpan]]:
    session = session_lookup.load_session(sid, store=store)
    workspace = media.session_workspace(sid, store=store)
    if not workspace.is_dir():
        raise NotFound("This session's workspace folder does not exist")
    running = turn_journal.live_turn_for(sid, turns=turns) is not None
    return workspace, spans(list(getattr(session, "messages", None) or []), running)


def dated(history: list[Point], kept: int) -> list[Point]:
    """The checkpoints whose time can be trusted. Past ``kept`` checkpoints the agent rebuilds the folder's
    history at each new one, and every rebuilt checkpoint carries the time of the rebuild: such a history
    (full, all within a couple of seconds) keeps only its newest, the one taken then."""
    rebuilt = len(history) >= max(2, kept) and history[-1].at - history[0].at <= 2
    return history[-1:] if rebuilt else history


def _histories(workspace: Any) -> dict[Project, list[Point]]:
    kept = checkpoint_store.kept_per_folder()
    return {
        project: dated(checkpoint_store.points(project), kept)
        for project in checkpoint_store.projects_in(workspace)
    }


def _ranges(histories: dict[Project, list[Point]], span: TurnSpan) -> list[Range]:
    found = []
    for project, history in histories.items():
        bounds = turn_range(span, history)
        if bounds:
            found.append(Range(project, *bounds))
    return found


def _turn_ranges(
    sid: str, turn: Any, store: models.Store | None, turns: turn_journal.LiveTurns | None
) -> tuple[Any, list[Range]]:
    number = _turn_number(turn)
    workspace, all_spans = _session_spans(sid, store, turns)
    span = next((s for s in all_spans if s.turn == number), None)
    if span is None:
        raise NotFound("No such turn in this session")
    return workspace, _ranges(_histories(workspace), span)


def _files(ranges: list[Range]) -> list[tuple[Range, FileChange]]:
    rows: dict[str, tuple[Range, FileChange]] = {}
    for part in ranges:
        for change in checkpoint_store.changes(part.project, part.start, part.end):
            rows.setdefault(_full(part.project, change.path), (part, change))
    return [rows[path] for path in sorted(rows)]


def _full(project: Project, path: str) -> str:
    return f"{project.prefix}/{path}" if project.prefix else path


def _totals(rows: list[tuple[Range, FileChange]]) -> dict[str, int]:
    return {
        "files_changed": len(rows),
        "insertions": sum(change.insertions for _part, change in rows),
        "deletions": sum(change.deletions for _part, change in rows),
    }


def session_turns(
    sid: str, *, store: models.Store | None = None, turns: turn_journal.LiveTurns | None = None
) -> dict[str, Any]:
    """``{turns: [{turn, files_changed, insertions, deletions}]}``: every turn that changed files."""
    workspace, all_spans = _session_spans(sid, store, turns)
    histories = _histories(workspace)
    changed = []
    for span in all_spans:
        rows = _files(_ranges(histories, span))
        if rows:
            changed.append({"turn": span.turn, **_totals(rows)})
    return {"turns": changed}


def turn_files(
    sid: str, turn: Any, *, store: models.Store | None = None, turns: turn_journal.LiveTurns | None = None
) -> dict[str, Any]:
    """``{turn, files: [{path, status, insertions, deletions, binary}], files_changed, insertions,
    deletions, truncated}``: the files one turn changed (the list cut at ``FILES_MAX``, the counts whole)."""
    _workspace, ranges = _turn_ranges(sid, turn, store, turns)
    rows = _files(ranges)
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
) -> dict[str, Any]:
    """``{turn, path, diff, lines, truncated}``: one file's diff in the turn, cut at ``DIFF_MAX_LINES``."""
    workspace, ranges = _turn_ranges(sid, turn, store, turns)
    media.resolve_in_workspace(workspace, path)
    for part, change in _files(ranges):
        if _full(part.project, change.path) == path:
            text = checkpoint_store.file_diff(part.project, part.start, part.end, change.path)
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


def _put_back(
    plan: list[tuple[Range, str]], rows: list[tuple[Range, FileChange]], why: str
) -> dict[str, Any]:
    """Each folder's files of the turn as ``commit`` holds them, after the agent's snapshot of the state now
    (a reason starting "pre-rollback", which never starts a turn): ``{restored, undo}``."""
    undo, restored = [], 0
    for part, commit in plan:
        paths = [change.path for owner, change in rows if owner is part]
        kept = checkpoint_store.snapshot(part.project, f"{_ROLLBACK} snapshot ({why} {commit[:8]})")
        restored += checkpoint_store.restore_files(part.project, commit, paths)
        undo.append({"folder": part.project.prefix, "hash": kept})
    return {"restored": restored, "undo": undo}


def restore_turn(
    sid: str, turn: Any, *, store: models.Store | None = None, turns: turn_journal.LiveTurns | None = None
) -> dict[str, Any]:
    """Puts every file the turn changed back as it was before the turn (files it added are removed). The
    agent first checkpoints the state now; ``undo`` names those checkpoints, one per folder."""
    _refuse_while_running(sid, turns)
    _workspace, ranges = _turn_ranges(sid, turn, store, turns)
    rows = _files(ranges)
    if not rows:
        raise NotFound("This turn changed no files")
    plan = [(part, part.start) for part in ranges if any(owner is part for owner, _change in rows)]
    return {"turn": _turn_number(turn), **_put_back(plan, rows, "restoring a turn to")}


def undo_restore(
    sid: str,
    turn: Any,
    undo: Any,
    *,
    store: models.Store | None = None,
    turns: turn_journal.LiveTurns | None = None,
) -> dict[str, Any]:
    """Puts the turn's files back as the snapshots ``undo`` names hold them (the state before the restore);
    itself undoable the same way."""
    _refuse_while_running(sid, turns)
    if not isinstance(undo, list) or not undo or len(undo) > 100:
        raise BadRequest("undo must be the list a turn's restore answered")
    _workspace, ranges = _turn_ranges(sid, turn, store, turns)
    rows = _files(ranges)
    plan = []  # every item checked before any file is touched
    for item in undo:
        folder, commit = (item.get("folder"), item.get("hash")) if isinstance(item, dict) else (None, None)
        if not isinstance(commit, str) or not 4 <= len(commit) <= 64 or not set(commit) <= _HEX:
            raise BadRequest("undo names a checkpoint by its hash (hexadecimal)")
        part = next((r for r in ranges if r.project.prefix == folder), None)
        if part is None:
            raise NotFound("This turn changed nothing in that folder")
        if not checkpoint_store.has_commit(part.project, commit):
            raise NotFound("No such checkpoint")
        plan.append((part, commit))
    return {"turn": _turn_number(turn), **_put_back(plan, rows, "undoing a restore to")}

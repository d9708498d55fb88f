"""Long-running work as cards (pure rules): a subagent's progress events folded into one card each.

hermes-agent's ``delegate_task`` relays each child agent's progress to the parent's
``tool_progress_callback`` as ``subagent.start``, ``subagent.tool``, ``subagent.thinking``,
``subagent.text``, ``subagent.progress`` and ``subagent.complete`` (with ``subagent_id``, ``goal``,
``task_index``, ``tool_count`` and, on completion, ``status``, ``summary``, ``duration_seconds``).
``Cards.fold`` turns the start, tool and completion events into the card the page shows: its goal, the
tool in use and what it works on, elapsed time and the result. The turn keeps the newest state of each
card and saves it on the answer row that made the call (``attach``), so a reload or a restart shows the
final or last-known state.
"""

from __future__ import annotations

import json
from typing import Any

GOAL_CHARS = 300  # of a subagent's goal on its card
STEP_CHARS = 200  # of the latest step (a tool's preview, an output line)
SUMMARY_CHARS = 2000  # of the result the card shows; the tool row holds the whole
ROW_KEY = (
    "work_cards"  # the answer row's field holding its cards (the model never sees it: api.rules.sanitize)
)
_ENDED = {"completed", "failed", "error", "timeout", "interrupted", "stopped", "lost"}
# Streamed text and batched summaries repeat the tools; "thinking" is the child's spinner line ("mulling...").
_SKIPPED = {"subagent.text", "subagent.progress", "subagent.thinking"}


def _cut(value: Any, limit: int) -> str:
    text = " ".join(str(value or "").split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


class Cards:
    """The cards of one turn, by id, in the order they started."""

    def __init__(self) -> None:
        self.by_id: dict[str, dict[str, Any]] = {}

    def fold(
        self,
        event_type: str,
        tool_name: Any,
        preview: Any,
        extra: dict[str, Any],
        tool_id: str | None,
        now: float,
    ) -> dict[str, Any] | None:
        """The card a subagent event changes, as it is now (a copy), or None for an event that is not one."""
        if not event_type.startswith("subagent.") or event_type in _SKIPPED:
            return None
        key = str(extra.get("subagent_id") or f"task-{extra.get('task_index', 0)}")
        card = self.by_id.get(key)
        if card is None:
            card = {
                "id": key,
                "kind": "subagent",
                "tool_id": tool_id,
                "goal": _cut(extra.get("goal") or preview, GOAL_CHARS),
                "task_index": extra.get("task_index") if isinstance(extra.get("task_index"), int) else 0,
                "task_count": extra.get("task_count") if isinstance(extra.get("task_count"), int) else 1,
                "status": "running",
                "started_at": now,
                "tool": None,
                "step": "",
                "tool_count": 0,
            }
            self.by_id[key] = card
        if isinstance(extra.get("tool_count"), int):
            card["tool_count"] = extra["tool_count"]
        if event_type == "subagent.tool":
            card["tool"] = _cut(tool_name, 80) or None
            card["step"] = _cut(preview, STEP_CHARS)
        elif event_type == "subagent.complete":
            status = str(extra.get("status") or "completed")
            card["status"] = status if status in _ENDED else "completed"
            card["tool"] = None
            card["ended_at"] = now
            card["summary"] = _cut(extra.get("summary") or preview, SUMMARY_CHARS)
            duration = _number(extra.get("duration_seconds"))
            if duration is not None:
                card["duration_seconds"] = duration
            if isinstance(extra.get("api_calls"), int):
                card["api_calls"] = extra["api_calls"]
        return dict(card)


def settled(cards: list[dict[str, Any]], status: str, now: float) -> list[dict[str, Any]]:
    """Copies of ``cards`` with the subagents still running marked ended as ``status`` (the turn ended first);
    a background process outlives its turn and stays as it is."""
    out = []
    for card in cards:
        copy = dict(card)
        if copy.get("status") == "running" and copy.get("kind") != "process":
            copy.update(status=status, ended_at=now, tool=None)
        out.append(copy)
    return out


def attach(rows: list[dict[str, Any]], cards: list[dict[str, Any]]) -> None:
    """Each card onto the answer row that made its tool call, else the last answer row of ``rows``."""
    answers = [row for row in rows if row.get("role") == "assistant"]
    if not cards or not answers:
        return
    by_call: dict[str, dict[str, Any]] = {}
    for row in answers:
        for call in row.get("tool_calls") or []:
            if isinstance(call, dict) and isinstance(call.get("id"), str):
                by_call[call["id"]] = row
    for card in cards:
        row = by_call.get(card.get("tool_id") or "") or answers[-1]
        row[ROW_KEY] = [c for c in row.get(ROW_KEY) or [] if c.get("id") != card["id"]] + [card]


# -- background processes (the terminal tool with ``background: true``) -------------------------------

BACKGROUND_TOOL = "terminal"
OUTPUT_CHARS = 1500  # of a background process's output kept on its card


def _json_object(value: Any) -> dict[str, Any]:
    if isinstance(value, dict):
        return value
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except ValueError:
            return {}
        return parsed if isinstance(parsed, dict) else {}
    return {}


def process_card(tool_id: str | None, args: Any, result: Any, now: float) -> dict[str, Any] | None:
    """The card of a background process the terminal tool started, or None for any other terminal call."""
    started = _json_object(result)
    proc_id = started.get("session_id")
    if not (_json_object(args).get("background") and isinstance(proc_id, str) and proc_id):
        return None
    return {
        "id": proc_id,
        "kind": "process",
        "tool_id": tool_id,
        "goal": _cut(_json_object(args).get("command"), GOAL_CHARS),
        "status": "running",
        "started_at": now,
        "pid": started.get("pid") if isinstance(started.get("pid"), int) else None,
        "tool": None,
        "step": "",
        "tool_count": 0,
    }


def process_update(card: dict[str, Any], state: dict[str, Any] | None, now: float) -> dict[str, Any]:
    """``card`` as the registry's ``state`` (``{exited, exit_code, output}``) says it is now; a process the
    registry no longer knows (it drops old finished ones) is ``lost``."""
    out = dict(card)
    if state is None:
        out.update(status="lost", ended_at=now)
        return out
    output = str(state.get("output") or "")
    lines = [line for line in output.splitlines() if line.strip()]
    out["step"] = _cut(lines[-1], STEP_CHARS) if lines else ""
    if state.get("exited"):
        code = state.get("exit_code")
        out.update(status="completed" if code == 0 else "failed", ended_at=now, exit_code=code)
        out["summary"] = output[-OUTPUT_CHARS:].strip()
        out["duration_seconds"] = round(now - float(card.get("started_at") or now), 2)
    return out


def without_card(rows: list[dict[str, Any]], card_id: str) -> bool:
    """The card ``card_id`` taken off every row of ``rows`` that holds it; False when none did."""
    found = False
    for index, row in enumerate(rows):
        held = row.get(ROW_KEY)
        if isinstance(held, list) and any(isinstance(c, dict) and c.get("id") == card_id for c in held):
            kept = [c for c in held if not (isinstance(c, dict) and c.get("id") == card_id)]
            rows[index] = {**row, ROW_KEY: kept} if kept else {k: v for k, v in row.items() if k != ROW_KEY}
            found = True
    return found


def moved_to_last_answer(rows: list[dict[str, Any]], card: dict[str, Any]) -> bool:
    """``card`` taken off every row that holds it and put on the last answer row of ``rows`` (a goal's
    card follows its newest turn); False when there is no answer row to hold it."""
    last = next((i for i in range(len(rows) - 1, -1, -1) if rows[i].get("role") == "assistant"), None)
    if last is None:
        return False
    without_card(rows, card["id"])
    row = rows[last]
    rows[last] = {**row, ROW_KEY: [*(row.get(ROW_KEY) or []), card]}
    return True

"""The rows a finished turn leaves, decided from the agent's result alone (pure rules for ``api.services.streaming``).

The agent returns its whole message list; the turn's rows are those after this turn's user row, which the
agent stamps with the write-ahead timestamp. ``turn_outcome`` also says whether the turn failed, was stopped
by the person, or was interrupted by a shutdown, and shapes the partial answer accordingly. ``turn`` is an
``api.agent.turn_journal.Turn`` (its user text and timestamp, the streamed text, the stop flags).
"""

from __future__ import annotations

import copy
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from api.rules import work_cards
from api.rules.sanitize import scrub_surrogates
from api.rules.session_fields import message_text

if TYPE_CHECKING:  # the type only: these rules read a turn, they need nothing of the journal at run time
    from api.agent.agent_turn import TurnResult
    from api.agent.turn_journal import Turn

log = logging.getLogger("talaria.turn_rows")


def partial_row(turn: Turn, now: float) -> dict[str, Any]:
    row = {"role": "assistant", "content": "".join(turn.partial_text), "timestamp": now, "_partial": True}
    if turn.partial_reasoning:
        row["reasoning"] = "".join(turn.partial_reasoning)
    if turn.work_cards:  # a crash leaves the cards as last seen, still running
        row[work_cards.ROW_KEY] = list(turn.work_cards.values())
    return row


def is_turn_user_row(row: Any, turn: Turn) -> bool:
    """This turn's user row: the agent stamps it with the timestamp passed as ``persist_user_timestamp``
    (text is the fallback for a row that lost its stamp)."""
    if not (isinstance(row, dict) and row.get("role") == "user"):
        return False
    if turn.user_ts is not None and row.get("timestamp") == turn.user_ts:
        return True
    return message_text(row) == turn.user_text


def new_rows(result_messages: list[Any], turn: Turn) -> list[dict[str, Any]]:
    """The rows the agent added after this turn's user row, in order."""
    rows = [r for r in result_messages if isinstance(r, dict)]
    stamped = [
        i for i, r in enumerate(rows) if r.get("role") == "user" and r.get("timestamp") == turn.user_ts
    ]
    found = stamped or [i for i, r in enumerate(rows) if is_turn_user_row(r, turn)]
    if not found:
        if rows:
            log.warning("turn %s: the agent's messages lack this turn's user row", turn.stream_id)
        return []
    return [stored_row(r) for r in rows[found[-1] + 1 :]]


def stored_row(row: dict[str, Any]) -> dict[str, Any]:
    """A copy of an agent row without the agent's own bookkeeping keys."""
    out = scrub_surrogates(copy.deepcopy(row))
    out.pop("_db_persisted", None)
    return cast("dict[str, Any]", out)


def stamp(rows: list[dict[str, Any]], base: float) -> None:
    for k, row in enumerate(rows):
        if not row.get("timestamp"):
            row["timestamp"] = base + k * 1e-6


@dataclass
class Outcome:
    """How a turn ends, decided from its result alone (``turn_outcome``), then applied by ``api.services.streaming``."""

    rows: list[dict[str, Any]]  # the answer rows to append to the transcript
    error: tuple[str, str | None] | None  # (message, hint) of an error event and its visible row
    stopped: bool  # the person stopped it (or a shutdown did)
    interrupted: bool  # a shutdown stopped it: keep the text as partial and add the interrupted marker


def turn_outcome(
    turn: Turn, result: TurnResult | None, error: tuple[str, str | None] | None, now: float
) -> Outcome:
    rows: list[dict[str, Any]] = []
    if result is not None:
        failed = result.failed or (result.error and not result.completed and not result.interrupted)
        rows = new_rows(result.messages, turn)
        # A failed turn's final_response is the agent's error text, and a stopped one's (without rows)
        # its "Operation interrupted: waiting for model response" notice: neither is an answer.
        if not rows and result.final_response and not failed and not result.interrupted:
            rows = [{"role": "assistant", "content": result.final_response}]
        if failed:
            error = (result.error or "The model call failed.", None)
    stopped = turn.cancel_requested or turn.worker_lost or (result is not None and result.interrupted)
    if stopped and not rows and turn.partial_text:
        rows = [partial_row(turn, now)]
    for row in rows:
        row.pop("_partial", None)
    # A turn stopped by a shutdown, or whose worker process ended, was not cancelled by the person: it
    # ends like a crashed one (its text kept as partial, then the interrupted marker), saved in good order.
    ended_under_it = turn.stopped_by_shutdown or turn.worker_lost
    interrupted = ended_under_it and (result is None or result.interrupted or not result.completed)
    if stopped and rows:
        if not interrupted:
            rows[-1]["_cancelled"] = True
        elif rows[-1].get("role") == "assistant":
            rows[-1]["_partial"] = True
    stamp(rows, now)
    if turn.work_cards:  # work the turn did not see end ended with it
        ended = "interrupted" if interrupted else "stopped" if stopped or error else "completed"
        work_cards.attach(rows, work_cards.settled(list(turn.work_cards.values()), ended, now))
    return Outcome(rows, error, stopped, interrupted)


def rows_before_turn(session: Any, turn: Turn) -> int:
    """How many rows preceded this turn (not its write-ahead user row): what a compression covered."""
    count = len(session.messages)
    if count and is_turn_user_row(session.messages[-1], turn):
        count -= 1
    return count

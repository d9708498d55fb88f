"""The rows a finished turn leaves, decided from the agent's result (``api.agent.turn_rows``)."""

from __future__ import annotations

from api.agent import turn_journal, turn_rows
from api.agent.agent_turn import TurnResult


def test_failed_turn_keeps_the_error_visible_but_out_of_the_answer():
    turn = turn_journal.Turn("s", "chat", "q")
    failed = TurnResult(final_response="API call failed: HTTP 500", failed=True, error="HTTP 500")
    outcome = turn_rows.turn_outcome(turn, failed, None, now=5.0)
    assert outcome.rows == []
    assert outcome.error == ("HTTP 500", None)


def test_turn_outcome_takes_the_rows_after_our_user_message():
    turn = turn_journal.Turn("s", "chat", "q")
    rows = [
        {"role": "user", "content": "old"},
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "a", "_db_persisted": True},
    ]
    outcome = turn_rows.turn_outcome(
        turn, TurnResult(final_response="a", messages=rows, completed=True), None, now=5.0
    )
    assert outcome.rows == [{"role": "assistant", "content": "a", "timestamp": 5.0}]
    assert not outcome.stopped and not outcome.interrupted


def test_shutdown_stop_is_interrupted_not_cancelled():
    turn = turn_journal.Turn("s", "chat", "q")
    turn.cancel_requested = turn.stopped_by_shutdown = True
    turn.partial_text = ["half "]
    outcome = turn_rows.turn_outcome(turn, TurnResult(interrupted=True), None, now=5.0)
    assert outcome.interrupted and outcome.stopped
    assert outcome.rows[-1]["_partial"] is True and "_cancelled" not in outcome.rows[-1]


def test_turn_outcome_finds_our_user_row_by_its_timestamp_even_when_the_agent_rewrote_its_text():
    turn = turn_journal.Turn("s", "chat", "fresh words", user_ts=7.5)
    rows = [
        {"role": "user", "content": "lost words\n\nfresh words", "timestamp": 7.5},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "c1"}]},
        {"role": "tool", "tool_call_id": "c1", "content": "ok"},
        {"role": "assistant", "content": "done"},
    ]
    outcome = turn_rows.turn_outcome(
        turn, TurnResult(final_response="done", messages=rows, completed=True), None, now=9.0
    )
    assert [m["role"] for m in outcome.rows] == ["assistant", "tool", "assistant"]

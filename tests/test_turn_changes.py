"""How checkpoints line up with turns (pure): a turn's changes run from the first checkpoint taken in its
span to the next one after it, or to now for the latest; a person's restore snapshot never starts a turn."""

from __future__ import annotations

import math

from api.agent.checkpoint_store import Point
from api.services.checkpoint_keepers import dated
from api.services.turn_changes import TurnSpan, spans, turn_range


def test_each_turns_span_runs_from_its_user_row_to_its_last_row_and_the_running_one_has_no_end():
    rows = [
        {"role": "user", "timestamp": 100.5},
        {"role": "assistant", "timestamp": 104.0},
        {"role": "user", "timestamp": 110.0},
        {"role": "assistant"},
        {"role": "user"},  # an imported row without a time: left out
        {"role": "user", "timestamp": 120.0},
    ]
    assert spans(rows, running=True) == [
        TurnSpan(0, 100.5, 104.0, 110.0),
        TurnSpan(2, 110.0, 110.0, None),
        TurnSpan(5, 120.0, math.inf, None),
    ]


def test_a_turn_runs_from_its_first_checkpoint_to_the_next_after_it_and_restores_never_start_one():
    history = [
        Point("a", 101, "before write_file"),
        Point("b", 103, "before patch"),  # a second round of the same turn
        Point("c", 107, "pre-rollback snapshot (restoring a turn)"),
        Point("d", 111, "before write_file"),
    ]
    first = TurnSpan(0, 100.5, 104.0, 110.0)
    latest = TurnSpan(2, 110.0, 115.0, None)
    assert turn_range(first, history) == ("a", "c")
    assert turn_range(latest, history) == ("d", None)
    assert turn_range(TurnSpan(4, 200.0, 210.0, None), history) is None
    assert turn_range(TurnSpan(6, 106.5, 108.0, None), history) is None  # only a person's restore in it


def test_a_history_the_agent_rebuilt_past_its_limit_keeps_only_its_newest_checkpoint_dated():
    rebuilt = [Point(str(i), 500 + (i == 2), "before write_file") for i in range(3)]
    assert dated(rebuilt, kept=3) == rebuilt[-1:]
    quick_rounds = [Point("a", 500, "before write_file"), Point("b", 500, "before patch")]
    assert dated(quick_rounds, kept=20) == quick_rounds  # not full: the times are the agent's own
    spread = [Point(str(i), 100 * i, "before write_file") for i in range(3)]
    assert dated(spread, kept=3) == spread

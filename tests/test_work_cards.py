"""The rules of long-running work cards: a subagent's progress events folded into its card, the card's place
on the answer row that started it, and what a turn that ended first leaves of a running card."""

from __future__ import annotations

from api.rules import work_cards

IDENTITY = {"subagent_id": "sa-1", "goal": "Find the bug", "task_index": 0, "task_count": 1, "tool_count": 0}


def test_a_subagent_becomes_one_card_with_its_tool_in_use_then_its_result():
    cards = work_cards.Cards()
    started = cards.fold("subagent.start", None, "Find the bug", IDENTITY, "call_1", 100.0)
    assert started is not None
    assert (
        started["status"] == "running"
        and started["goal"] == "Find the bug"
        and started["tool_id"] == "call_1"
    )
    tool = cards.fold("subagent.tool", "terminal", "grep -rn bug", {**IDENTITY, "tool_count": 1}, None, 101.0)
    assert tool is not None
    assert (tool["tool"], tool["step"], tool["tool_count"], tool["tool_id"]) == (
        "terminal",
        "grep -rn bug",
        1,
        "call_1",
    )
    done = cards.fold(
        "subagent.complete",
        None,
        "Found it",
        {
            **IDENTITY,
            "status": "completed",
            "summary": "Found it in x.py",
            "duration_seconds": 4.5,
            "api_calls": 2,
        },
        None,
        105.0,
    )
    assert done is not None
    assert done["status"] == "completed" and done["summary"] == "Found it in x.py" and done["tool"] is None
    assert (done["duration_seconds"], done["api_calls"], done["ended_at"]) == (4.5, 2, 105.0)
    assert list(cards.by_id) == ["sa-1"]


def test_streamed_text_spinner_lines_and_other_tools_progress_make_no_card():
    cards = work_cards.Cards()
    for event in (
        "subagent.text",
        "subagent.thinking",
        "subagent.progress",
        "tool.started",
        "reasoning.available",
    ):
        assert cards.fold(event, "x", "(⊙_⊙) mulling...", IDENTITY, None, 1.0) is None
    assert cards.by_id == {}


def test_cards_go_on_the_row_that_made_the_call_else_on_the_last_answer():
    rows = [
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": "call_1", "function": {"name": "delegate_task"}}],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "{}"},
        {"role": "assistant", "content": "Done."},
    ]
    work_cards.attach(rows, [{"id": "a", "tool_id": "call_1"}, {"id": "b", "tool_id": "call_9"}])
    assert rows[0]["work_cards"] == [{"id": "a", "tool_id": "call_1"}]
    assert rows[2]["work_cards"] == [{"id": "b", "tool_id": "call_9"}]
    assert "work_cards" not in rows[1]


def test_a_card_still_running_when_the_turn_ended_is_marked_so_and_an_ended_one_kept():
    cards = [
        {"id": "a", "status": "running", "tool": "terminal"},
        {"id": "b", "status": "failed", "tool": None},
    ]
    ended = work_cards.settled(cards, "stopped", 9.0)
    assert ended[0] == {"id": "a", "status": "stopped", "tool": None, "ended_at": 9.0}
    assert ended[1] == cards[1] and cards[0]["status"] == "running"


def test_a_background_terminal_call_makes_a_process_card_and_a_foreground_one_none():
    started = '{"output": "Background process started", "session_id": "proc_abc", "pid": 42, "exit_code": 0}'
    card = work_cards.process_card("call_7", {"command": "make test", "background": True}, started, 10.0)
    assert card is not None
    assert (card["id"], card["kind"], card["goal"], card["pid"], card["status"]) == (
        "proc_abc",
        "process",
        "make test",
        42,
        "running",
    )
    assert (
        work_cards.process_card("call_8", {"command": "ls"}, '{"output": "a", "exit_code": 0}', 1.0) is None
    )
    assert work_cards.process_card("call_9", '{"background": true}', "not json", 1.0) is None


def test_a_process_card_shows_its_latest_output_line_then_its_exit_code_and_output():
    card = {"id": "proc_abc", "kind": "process", "status": "running", "started_at": 10.0, "step": ""}
    running = work_cards.process_update(
        card, {"exited": False, "exit_code": None, "output": "one\ntwo\n\n"}, 11.0
    )
    assert running["status"] == "running" and running["step"] == "two" and "summary" not in running
    failed = work_cards.process_update(card, {"exited": True, "exit_code": 2, "output": "boom\n"}, 14.0)
    assert (failed["status"], failed["exit_code"], failed["summary"], failed["duration_seconds"]) == (
        "failed",
        2,
        "boom",
        4.0,
    )
    assert (
        work_cards.process_update(card, {"exited": True, "exit_code": 0, "output": ""}, 12.0)["status"]
        == "completed"
    )
    assert work_cards.process_update(card, None, 12.0)["status"] == "lost"


def test_a_process_still_running_when_its_turn_ends_stays_running():
    cards = [{"id": "proc_1", "kind": "process", "status": "running"}]
    assert work_cards.settled(cards, "completed", 5.0) == cards


def test_a_goal_card_moves_onto_the_newest_answer_and_is_held_once():
    card = {"id": "goal-s-1", "kind": "goal", "status": "active"}
    other = {"id": "sa-1", "kind": "subagent"}
    rows = [
        {"role": "user", "content": "goal"},
        {"role": "assistant", "content": "one", work_cards.ROW_KEY: [card, other]},
        {"role": "user", "content": "go on"},
        {"role": "assistant", "content": "two", work_cards.ROW_KEY: [card]},
        {"role": "user", "content": "go on"},
        {"role": "assistant", "content": "three"},
    ]
    judged = {**card, "status": "done"}
    assert work_cards.moved_to_last_answer(rows, judged)
    assert rows[1][work_cards.ROW_KEY] == [other]
    assert work_cards.ROW_KEY not in rows[3]
    assert rows[5][work_cards.ROW_KEY] == [judged]
    assert work_cards.without_card(rows, "goal-s-1") and work_cards.ROW_KEY not in rows[5]
    assert not work_cards.without_card(rows, "goal-s-1")
    assert not work_cards.moved_to_last_answer([{"role": "user", "content": "x"}], card)

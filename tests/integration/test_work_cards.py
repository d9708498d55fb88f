"""Long-running work as cards: a scripted delegation through the real server, the real agent and its
``delegate_task``; the parent's and the child agent's model calls both answered by the fake LLM."""

from __future__ import annotations

import time

import pytest

from talaria_testing.chat_client import SSE, assert_well_formed, named, new_session, on_disk, session, start
from talaria_testing.fake_llm import Reply, agent_server

pytestmark = pytest.mark.integration

GOAL = "List the planned tasks"
TODO_ARGS = {"todos": [{"id": "1", "content": "write the tests", "status": "pending"}]}


@pytest.fixture(scope="module")
def srv(llm, tmp_path_factory):
    with agent_server(
        tmp_path_factory.mktemp("work_cards"),
        llm.base_url,
        toolsets="delegation,todo",
        env={"TALARIA_CHECKPOINT_INTERVAL": "0.2"},
    ) as server:
        yield server


def _script_delegation(fake, child_delay: float = 0.0) -> None:
    fake.script(
        Reply(
            text="Delegating.",
            tool_calls=[{"id": "call_d1", "name": "delegate_task", "arguments": {"goal": GOAL}}],
        ),
        Reply(
            text="", tool_calls=[{"id": "call_c1", "name": "todo", "arguments": TODO_ARGS}], delay=child_delay
        ),
        Reply(text="The child found one task: write the tests."),
        Reply(text="The subagent is done."),
    )


def test_a_delegation_streams_its_subagent_card_live_and_saves_the_final_card(srv, fake):
    sid = new_session(srv)
    _script_delegation(fake)
    with SSE(srv, start(srv, sid, "delegate it")) as sse:
        events = list(sse)
    assert_well_formed(events)
    cards = named(events, "work")
    assert cards, "no work event arrived"
    first, last = cards[0], cards[-1]
    assert first["kind"] == "subagent" and first["goal"] == GOAL and first["status"] == "running"
    assert first["tool_id"] == "call_d1"
    assert any(c.get("tool") == "todo" for c in cards), cards
    assert last["status"] == "completed" and "write the tests" in last["summary"]
    kinds = [n for _, n, _ in events]
    assert kinds.index("work") < kinds.index("tool_complete")  # live: before the delegation returned
    saved = on_disk(srv, sid)["messages"]
    caller = next(m for m in saved if m.get("tool_calls"))
    assert caller["work_cards"] == [last]
    assert session(srv, sid)["messages"][1]["work_cards"][0]["status"] == "completed"
    # The model never sees the cards.
    fake.script(Reply(text="ok"))
    list(SSE(srv, start(srv, sid, "thanks")))
    sent = fake.chat_requests()[-1]["body"]["messages"]
    assert not any("work_cards" in m for m in sent)


def test_a_restart_mid_delegation_keeps_the_card_last_seen(llm, fake, tmp_path):
    with agent_server(
        tmp_path, llm.base_url, toolsets="delegation,todo", env={"TALARIA_CHECKPOINT_INTERVAL": "0.2"}
    ) as server:
        sid = new_session(server)
        fake.script(
            Reply(
                text="", tool_calls=[{"id": "call_d2", "name": "delegate_task", "arguments": {"goal": GOAL}}]
            ),
            Reply(text="", tool_calls=[{"id": "call_c2", "name": "todo", "arguments": TODO_ARGS}]),
            Reply(text="never", hang_after=0),
        )
        with SSE(server, start(server, sid, "delegate it")) as sse:
            for _, name, data in sse:
                if name == "work" and data.get("tool") == "todo":
                    break
        assert fake.wait_for_hang(20)
        assert _eventually(
            lambda: (
                _saved_cards(on_disk(server, sid)) and _saved_cards(on_disk(server, sid))[0]["tool"] == "todo"
            )
        )
        server.kill()
        fake.release()
        server.start()
        (card,) = _saved_cards(session(server, sid))
        assert card["goal"] == GOAL and card["tool"] == "todo" and card["status"] == "running"


def _saved_cards(data: dict) -> list[dict]:
    return [card for row in data["messages"] for card in row.get("work_cards") or []]


def _eventually(check, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.05)
    return False


@pytest.fixture(scope="module")
def terminal_srv(llm, tmp_path_factory):
    root = tmp_path_factory.mktemp("process_cards")
    with agent_server(
        root,
        llm.base_url,
        toolsets="terminal",
        env={"TALARIA_CHECKPOINT_INTERVAL": "0.2", "TALARIA_WORKSPACE_ROOTS": str(root)},
    ) as server:
        yield server


def _background(call_id: str, command: str) -> Reply:
    args = {"command": command, "background": True}
    return Reply(text="", tool_calls=[{"id": call_id, "name": "terminal", "arguments": args}])


def test_a_background_process_card_follows_the_process_live_to_its_exit(terminal_srv, fake):
    sid = new_session(terminal_srv)
    command = "sleep 0.5; echo finished-ok"
    fake.script(_background("call_p1", command), Reply(text="It ran.", delay=3.0))
    with SSE(terminal_srv, start(terminal_srv, sid, "run it in the background")) as sse:
        events = list(sse)
    assert_well_formed(events)
    cards = named(events, "work")
    assert cards[0]["kind"] == "process" and cards[0]["goal"] == command and cards[0]["status"] == "running"
    assert cards[0]["tool_id"] == "call_p1" and cards[0]["id"].startswith("proc_")
    last = cards[-1]
    assert last["status"] == "completed" and last["exit_code"] == 0 and "finished-ok" in last["summary"]
    assert _saved_cards(on_disk(terminal_srv, sid)) == [last]


def test_a_background_process_that_outlives_its_turn_has_its_end_saved_on_the_card(terminal_srv, fake):
    sid = new_session(terminal_srv)
    command = "sleep 2; echo later; exit 3"
    fake.script(_background("call_p2", command), Reply(text="Started it."))
    events = list(SSE(terminal_srv, start(terminal_srv, sid, "start it and go")))
    assert_well_formed(events)
    (card,) = _saved_cards(on_disk(terminal_srv, sid))
    assert card["status"] == "running" and card["goal"] == command
    updated_at = on_disk(terminal_srv, sid)["updated_at"]
    assert _eventually(lambda: _saved_cards(on_disk(terminal_srv, sid))[0]["status"] != "running", 15)
    (card,) = _saved_cards(on_disk(terminal_srv, sid))
    assert card["status"] == "failed" and card["exit_code"] == 3 and "later" in card["summary"]
    assert on_disk(terminal_srv, sid)["updated_at"] == updated_at  # not activity: the sidebar order stays

"""Long-running work in the browser: a delegation turn shows its subagent's card live, then its result,
and the card is still there after a reload."""

from __future__ import annotations

import re
import time

import pytest
from playwright.sync_api import expect

from talaria_testing.fake_llm import Reply, agent_server

from .helpers import goto_app, new_session, open_page, screenshots, send, wait_turn_done

pytestmark = pytest.mark.e2e

GOAL = "Survey the open tasks and report them"
TODO_ARGS = {"todos": [{"id": "1", "content": "write the tests", "status": "pending"}]}


@pytest.fixture(scope="module")
def work_server(tmp_path_factory, llm):
    root = tmp_path_factory.mktemp("work-cards-e2e")
    env = {"TALARIA_CHECKPOINT_INTERVAL": "0.5"}
    with agent_server(root, llm.base_url, toolsets="delegation,todo", env=env) as srv:
        _wait_for_the_model_list(srv)
        yield srv


@pytest.fixture(scope="module")
def terminal_server(tmp_path_factory, llm):
    root = tmp_path_factory.mktemp("process-cards-e2e")
    env = {"TALARIA_CHECKPOINT_INTERVAL": "0.5", "TALARIA_WORKSPACE_ROOTS": str(root)}
    with agent_server(root, llm.base_url, toolsets="terminal", env=env) as srv:
        _wait_for_the_model_list(srv)
        yield srv


def _wait_for_the_model_list(srv, timeout: float = 60.0) -> None:
    """The model list a page asks for first answers 503 while a busy machine still builds it."""
    deadline = time.monotonic() + timeout
    while srv.json("GET", "/api/models")[0] != 200:
        assert time.monotonic() < deadline, "the model list was never built"
        time.sleep(0.5)


# A server's first agent takes a while to build on a busy machine (the agent imports and probes its tools).
FIRST_TURN_MS = 60000


def test_a_delegation_turn_shows_its_subagent_live_then_its_result_after_a_reload(browser, work_server, llm):
    llm.script(
        Reply(
            text="I will delegate this.",
            tool_calls=[{"id": "call_w1", "name": "delegate_task", "arguments": {"goal": GOAL}}],
        ),
        Reply(text="", tool_calls=[{"id": "call_w2", "name": "todo", "arguments": TODO_ARGS}]),
        Reply(text="One open task: write the tests.", hang_after=1),
        Reply(text="The subagent reports one open task."),
    )
    with open_page(browser, work_server.base_url) as page:
        sid = new_session(page)
        before = send(page, "check my tasks with a subagent")
        card = page.locator(".live .work-card")
        expect(card.locator(".work-goal")).to_have_text(GOAL, timeout=FIRST_TURN_MS)
        expect(card.locator(".work-step")).to_contain_text("todo")
        expect(card).to_have_attribute("data-status", "running")
        expect(card.locator(".work-state")).to_contain_text("running ·")
        assert llm.wait_for_hang()
        screenshots(page, "work-card-live")
        llm.release()
        wait_turn_done(page, before)
        saved = page.locator(".msg .work-card")
        expect(saved).to_have_count(1)
        expect(saved).to_have_attribute("data-status", "completed")
        expect(saved.locator(".work-summary")).to_have_text("One open task: write the tests.")
        expect(saved.locator(".work-state")).to_contain_text("done ·")
        page.reload()
        goto_app(page, f"/#/s/{sid}")
        expect(page.locator(".msg .work-card .work-summary")).to_have_text("One open task: write the tests.")
        expect(page.locator(".msg .work-card .work-goal")).to_have_text(GOAL)
        page.locator(".msg .work-card").scroll_into_view_if_needed()
        screenshots(page, "work-card-done")


def test_a_background_process_shows_as_a_card_with_its_output_until_it_exits(browser, terminal_server, llm):
    command = "sleep 1; echo build ok"
    call = {"id": "call_b1", "name": "terminal", "arguments": {"command": command, "background": True}}
    llm.script(Reply(text="Starting the build.", tool_calls=[call]), Reply(text="The build runs.", delay=4.0))
    with open_page(browser, terminal_server.base_url, color_scheme="dark") as page:
        new_session(page)
        before = send(page, "build it in the background")
        card = page.locator(".live .work-card.work-process")
        # The first agent with the terminal tools takes a while to build (the agent probes its environment).
        expect(card.locator(".work-kind")).to_have_text("Background process", timeout=60000)
        expect(card.locator(".work-goal")).to_have_text(command)
        expect(card).to_have_attribute("data-status", "completed", timeout=10000)
        expect(card.locator(".work-summary")).to_have_text("build ok")
        expect(card.locator(".work-step")).to_have_text("Exit code 0")
        screenshots(page, "work-card-process")
        wait_turn_done(page, before)
        expect(page.locator(".msg .work-card.work-process .work-summary")).to_have_text("build ok")


def _judge(verdict: str, reason: str) -> Reply:
    return Reply(text=f'{{"verdict": "{verdict}", "reason": "{reason}"}}')


def test_a_goal_shows_one_card_live_through_its_turns_then_done_after_a_reload(browser, work_server, llm):
    goal = "Write the three steps of the release plan"
    llm.script(
        Reply(text="Step one of the release plan is written."),
        _judge("continue", "two steps of the plan remain"),
        Reply(text="Step two is written.", hang_after=2),
        _judge("done", "the plan has all its steps"),
    )
    with open_page(browser, work_server.base_url) as page:
        sid = new_session(page)
        box = page.locator("#composer-input")
        box.fill("/go")  # the agent's commands arrive after the page's own
        expect(page.locator("#slash-list [role=option] .slash-name")).to_have_text([re.compile(r"^/goal\b")])
        box.fill(f"/goal {goal}")
        box.press("Enter")
        live = page.locator(".live .work-card.work-goal-card")
        expect(live.locator(".work-state")).to_have_text("active · 1 of 20 turns", timeout=FIRST_TURN_MS)
        expect(live.locator(".work-kind")).to_have_text("Goal")
        expect(live.locator(".work-goal")).to_have_text(goal)
        expect(live.locator(".work-step")).to_have_text("Judge: continue — two steps of the plan remain")
        assert llm.wait_for_hang()
        expect(page.locator(".work-goal-card")).to_have_count(1)  # the earlier turn's copy gave way
        screenshots(page, "goal-card-live")
        llm.release()
        card = page.locator(".msg .work-card.work-goal-card")
        expect(card).to_have_attribute("data-status", "done", timeout=20000)
        expect(card).to_have_count(1)
        expect(card.locator(".work-step")).to_have_text("Judge: done — the plan has all its steps")
        page.reload()
        goto_app(page, f"/#/s/{sid}")
        saved = page.locator(".msg .work-card.work-goal-card")
        expect(saved).to_have_count(1)
        expect(saved.locator(".work-state")).to_have_text("done · 2 of 20 turns")
        saved.scroll_into_view_if_needed()
        screenshots(page, "goal-card-done")


def test_the_stop_button_during_a_goal_turn_pauses_the_goal_on_its_card(browser, work_server, llm):
    llm.script(Reply(text="Drafting the first step of the plan now.", hang_after=3))
    with open_page(browser, work_server.base_url, color_scheme="dark") as page:
        new_session(page)
        box = page.locator("#composer-input")
        box.fill("/go")
        expect(page.locator("#slash-list [role=option] .slash-name")).to_have_text([re.compile(r"^/goal\b")])
        box.fill("/goal Draft the plan")
        box.press("Enter")
        expect(page.locator(".live .work-goal-card .work-state")).to_have_text("active · 0 of 20 turns")
        assert llm.wait_for_hang()
        page.locator("#stop").click()
        card = page.locator(".msg .work-card.work-goal-card")
        expect(card).to_have_attribute("data-status", "paused", timeout=20000)
        expect(card.locator(".work-summary")).to_have_text("Paused: stopped by the person")
        card.scroll_into_view_if_needed()
        screenshots(page, "goal-card-paused")

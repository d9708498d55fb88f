"""The person's control of a turn in a real browser: the approval card, the clarify card, the workspace picker.

The server enables the terminal and clarify tools; every folder they touch is under the test's tmp folder.
"""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from talaria_testing.fake_llm import Reply

from .helpers import (
    PHONE,
    asking_server,
    goto_app,
    new_session,
    open_page,
    screenshot,
    screenshots,
    send,
    turns_done,
    wait_turn_done,
)

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def server(tmp_path_factory, llm):
    with asking_server(tmp_path_factory.mktemp("talaria-e2e-control"), llm, "terminal,clarify") as srv:
        yield srv


def victim(server, name: str):
    folder = server.root / "victims" / name
    folder.mkdir(parents=True)
    (folder / "keep.txt").write_text("precious")
    return folder


def open_new_session(page, server) -> str:
    """A new session opened by its address (a phone's session list is folded away)."""
    sid = server.post_json("/api/session/new", {})["session"]["session_id"]
    goto_app(page, f"/#/s/{sid}")
    expect(page.locator("#chat-title")).to_have_text("Untitled")
    return sid


def ask_to_remove(page, server, llm, folder) -> int:
    call = {"id": "call_rm", "name": "terminal", "arguments": {"command": f"rm -rf {folder}"}}
    llm.script(Reply(tool_calls=[call]), Reply(text="Finished."))
    open_new_session(page, server)
    turn = send(page, "tidy up that folder")
    card = page.locator(".approval-card")
    expect(card).to_be_visible()
    expect(card.locator(".approval-command")).to_have_text(f"rm -rf {folder}")
    expect(card.locator(".question-yolo input")).not_to_be_checked()
    expect(card.locator(".question-deadline")).to_contain_text("5 minutes")
    return turn


def test_the_approval_card_denies_and_nothing_runs(page, server, llm):
    folder = victim(server, "deny")
    ask_to_remove(page, server, llm, folder)
    screenshot(page, "approval-card")
    # A reloaded page sees the question that still waits (the turn's journal is replayed).
    page.reload()
    expect(page.locator(".approval-card .approval-command")).to_have_text(f"rm -rf {folder}")
    # The reload itself cut the first page's stream: that is not a fault of the page.
    page.guard.problems[:] = [p for p in page.guard.problems if "/api/chat/stream" not in p]
    turn = turns_done(page)
    page.locator(".approval-card button", has_text="Deny").click()
    expect(page.locator(".approval-card .question-outcome")).to_contain_text("Denied")
    wait_turn_done(page, turn)
    assert (folder / "keep.txt").read_text() == "precious"
    tool = page.locator(".tool-card").last
    expect(tool.locator(".tool-state")).to_have_text("blocked — did not run")
    expect(tool).to_contain_text("BLOCKED")


def test_the_approval_card_allows_once_and_the_command_runs(page, server, llm):
    folder = victim(server, "once")
    turn = ask_to_remove(page, server, llm, folder)
    sid = page.url.rsplit("/", 1)[1]
    # "Don't ask again" is a visible switch; while it is on, the header says so and offers the way back.
    indicator = page.locator("#yolo-indicator")
    expect(indicator).to_be_hidden()
    page.locator(".approval-card .question-yolo input").check()
    expect(indicator).to_be_visible()
    assert server.get_json(f"/api/approval/pending?session_id={sid}")["yolo"] is True
    screenshot(page, "approval-card-yolo-on")
    indicator.click()
    expect(indicator).to_be_hidden()
    expect(page.locator(".approval-card .question-yolo input")).not_to_be_checked()
    assert server.get_json(f"/api/approval/pending?session_id={sid}")["yolo"] is False
    page.locator(".approval-card button", has_text="Allow once").click()
    wait_turn_done(page, turn)
    assert not folder.exists()


def test_the_approval_card_shows_a_hidden_expansion_as_it_runs(page, server, llm):
    """The card showed the agent's redacted ``export GITHUB_TOKEN=***`` for a command substitution that
    deletes a folder; it shows the command that runs, and denying it leaves the folder."""
    folder = victim(server, "hidden")
    command = f"export GITHUB_TOKEN=$(rm${{IFS}}-rf${{IFS}}{folder})"
    call = {"id": "call_hidden", "name": "terminal", "arguments": {"command": command}}
    llm.script(Reply(tool_calls=[call]), Reply(text="Left it alone."))
    open_new_session(page, server)
    turn = send(page, "set the token")
    card = page.locator(".approval-card")
    expect(card.locator(".approval-command")).to_have_text(command)
    expect(card.locator(".approval-exact")).to_have_text("This is exactly the command that runs.")
    screenshots(page, "approval-hidden-expansion")
    card.locator("button", has_text="Deny").click()
    wait_turn_done(page, turn)
    assert (folder / "keep.txt").read_text() == "precious"


def test_the_approval_card_on_a_phone_in_the_dark(browser, server, llm):
    folder = victim(server, "phone")
    with open_page(browser, server.base_url, viewport=PHONE, color_scheme="dark") as phone:
        turn = ask_to_remove(phone, server, llm, folder)
        screenshot(phone, "approval-card-phone-dark")
        phone.locator(".approval-card button", has_text="Deny").click()
        wait_turn_done(phone, turn)
    assert folder.exists()


def test_the_clarify_card_sends_the_chosen_answer(page, server, llm):
    ask = {
        "id": "call_q",
        "name": "clarify",
        "arguments": {"question": "Which colour?", "choices": ["red", "blue"]},
    }
    llm.script(Reply(tool_calls=[ask]), Reply(text="Blue it is."))
    new_session(page)
    turn = send(page, "paint it")
    card = page.locator(".clarify-card")
    expect(card.locator(".question-text")).to_have_text("Which colour?")
    screenshot(page, "clarify-card")
    card.locator("button", has_text="blue").click()
    wait_turn_done(page, turn)
    expect(page.locator(".msg-assistant").last).to_contain_text("Blue it is.")
    sent = llm.chat_requests()[-1]["body"]["messages"]
    assert '"user_response": "blue"' in sent[-1]["content"]
    # The exchange stays readable in the transcript, also after a reload: question, choices, answer.
    for _ in range(2):
        exchange = page.locator('.tool-card[data-tool-name="clarify"]')
        exchange.locator(":scope > summary").click()
        expect(exchange.locator(".clarify-question")).to_have_text("Which colour?")
        expect(exchange.locator(".clarify-choice.picked")).to_have_text("✓ blue")
        expect(exchange.locator(".clarify-answer")).to_have_text("Answer: blue")
        page.reload()
        page.wait_for_selector("#app:not([hidden])")


def test_the_workspace_picker_refuses_a_folder_outside_the_roots_then_takes_a_good_one(page, server):
    page.guard.allowed_statuses.add(400)  # the refusal is the expected answer
    chosen = server.root / "project"
    chosen.mkdir()
    sid = new_session(page)
    picker = page.locator("#workspace-picker")
    expect(picker.locator(".workspace-label")).to_have_text(server.workspace.name)
    picker.locator("summary").click()
    box = picker.locator(".workspace-form input")
    box.fill("/etc")
    box.press("Enter")
    expect(picker.locator(".workspace-error")).to_contain_text("outside the allowed workspace roots")
    screenshot(page, "workspace-picker-refused")
    assert server.get_json(f"/api/session?session_id={sid}")["session"]["workspace"] == str(server.workspace)
    box.fill(str(chosen))
    box.press("Enter")
    expect(picker.locator(".workspace-label")).to_have_text("project")
    expect(picker.locator(".workspace-menu")).to_be_hidden()
    assert server.get_json(f"/api/session?session_id={sid}")["session"]["workspace"] == str(chosen)
    # The folder used before is offered again in the next session's picker.
    new_session(page)
    picker.locator("summary").click()
    expect(picker.locator(".workspace-option", has_text=str(chosen))).to_be_visible()

"""Queue, steer and interrupt from the page, with two tabs open on one session during a turn."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from talaria_testing.fake_llm import Reply

from .helpers import GREETING, import_session, screenshots, send, tabs_on_session, transcript_state

pytestmark = pytest.mark.e2e

WORDS = " ".join(f"word{i}" for i in range(12))


def _queued(page):
    return page.locator("#queue-panel .queue-item .queue-text")


def _type(page, text: str, key: str = "Enter") -> None:
    box = page.locator("#composer-input")
    box.fill(text)
    box.press(key)
    expect(box).to_have_value("")  # accepted: the box empties once the server has it


def test_two_tabs_see_one_queue_during_a_turn_and_the_same_turns_after_it(browser, server, llm):
    """A message sent while an answer streamed was refused (409); now it waits in a queue every tab
    shows, can be edited or cancelled from any of them, and runs after the answer in both."""
    sid = import_session(server, "Queue between tabs", GREETING)["session_id"]
    llm.script(Reply(text=WORDS, hang_after=6))
    with tabs_on_session(browser, server, sid) as (first, second):
        expect(second.locator(".msg")).to_have_count(2)
        send(first, "Tell me twelve words")
        assert llm.wait_for_hang(60)
        expect(second.locator("#queue-send")).to_be_visible()
        expect(first.locator("#composer-input")).to_have_attribute(
            "placeholder", "Enter queues · Ctrl+Enter steers · Alt+Enter interrupts"
        )
        _type(first, "Then a haiku")
        _type(second, "And a limerick")
        _type(second, "Forget this one")
        for page in (first, second):
            expect(_queued(page)).to_have_text(["Then a haiku", "And a limerick", "Forget this one"])
        # Edit in one tab, cancel in the other: both follow.
        first.locator("#queue-panel .queue-item").nth(1).get_by_role("button", name="Edit").first.click()
        first.locator("#queue-panel .queue-edit").fill("And a sonnet")
        first.locator("#queue-panel").get_by_role("button", name="Save").click()
        second.locator("#queue-panel .queue-item").nth(2).locator(".queue-cancel").click()
        for page in (first, second):
            expect(_queued(page)).to_have_text(["Then a haiku", "And a sonnet"])
        first.locator("#queue-mode").click()
        expect(first.locator("#queue-menu")).to_be_visible()
        screenshots(first, "queue-during-a-turn")
        first.keyboard.press("Escape")
        expect(first.locator("#queue-menu")).to_be_hidden()
        llm.release()
        for page in (first, second):
            expect(page.locator(".msg-user")).to_have_count(4, timeout=30000)
            expect(page.locator(".msg-assistant .msg-body").last).to_have_text(
                "echo: And a sonnet", timeout=30000
            )
            expect(page.locator("#queue-panel")).to_be_hidden()
            expect(page.locator("#send")).to_be_visible()
        expect(first.locator(".msg-user .msg-body")).to_have_text(
            ["Hi", "Tell me twelve words", "Then a haiku", "And a sonnet"]
        )
        assert transcript_state(second) == transcript_state(first)
        screenshots(second, "queue-after-the-turns")


def test_steer_from_the_keyboard_shows_in_both_tabs_and_interrupt_sends_next(browser, server, llm):
    """The interrupt waits until the held turn's first words are on the page: interrupting before any text
    reached the server ends that turn with nothing to keep, so no cancelled answer is drawn (a CI flake)."""
    sid = import_session(server, "Steer and interrupt", [])["session_id"]
    llm.script(Reply(text=WORDS, hang_after=4), Reply(text=WORDS, hang_after=4))
    with tabs_on_session(browser, server, sid) as (first, second):
        send(first, "Count for me")
        assert llm.wait_for_hang(60)
        expect(second.locator(".msg.live")).to_be_visible()
        _type(second, "Count in French", "Control+Enter")
        for page in (first, second):
            expect(page.locator(".msg.live .live-note-steer")).to_have_text("Steered: Count in French")
        screenshots(second, "queue-steered")
        llm.release()
        # No tool call followed, so the agent could not read it: it runs as the next message.
        for page in (first, second):
            expect(page.locator(".msg-user .msg-body")).to_have_text(
                ["Count for me", "Count in French"], timeout=30000
            )
        assert llm.wait_for_hang(60)  # the steer's own turn is held
        # What the interrupt cuts short is what the person saw arrive; text still on its way is not shown.
        expect(first.locator(".msg.live .live-text")).to_contain_text("word2")
        _type(first, "Stop and say hi", "Alt+Enter")
        for page in (first, second):
            expect(page.locator(".msg-user .msg-body")).to_have_text(
                ["Count for me", "Count in French", "Stop and say hi"], timeout=30000
            )
            expect(page.locator(".msg-assistant .msg-body").last).to_have_text(
                "echo: Stop and say hi", timeout=30000
            )
        expect(first.locator(".msg-cancelled, .msg-assistant.msg-cancelled")).not_to_have_count(0)
        assert transcript_state(second) == transcript_state(first)

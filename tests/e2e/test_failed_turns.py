"""A turn that failed: its message stays with its error and a Retry that sends it again, nothing glued on."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from talaria_testing.fake_llm import Reply

from .helpers import new_session, screenshots, send, turns_done, wait_turn_done

pytestmark = pytest.mark.e2e


def _user_texts_sent(llm) -> list[str]:
    body = llm.chat_requests()[-1]["body"]
    return [m["content"] for m in body["messages"] if m["role"] == "user"]


def test_a_failed_turn_offers_retry_and_retrying_sends_the_message_alone(page, server, llm):
    new_session(page)
    llm.script(*[Reply(status=401, error="key refused", for_user="lost words")] * 3)
    wait_turn_done(page, send(page, "lost words"))
    failed = page.locator("#messages .msg.msg-failed")
    expect(failed).to_contain_text("key refused")
    expect(page.locator("#messages .msg-user .msg-body")).to_have_text(["lost words"])
    retry = failed.locator("[data-action=retry]")
    expect(retry).to_have_count(1)
    screenshots(page, "failed-turn-retry")

    llm.reset()
    llm.script(Reply(text="Now it works.", for_user="lost words"))
    before = turns_done(page)
    retry.click()
    wait_turn_done(page, before)
    expect(page.locator("#messages .msg-user .msg-body")).to_have_text(["lost words"])  # cut, then sent again
    expect(page.locator("#messages .msg-assistant .msg-body").last).to_have_text("Now it works.")
    expect(page.locator("#messages [data-action=retry]")).to_have_count(0)
    assert _user_texts_sent(llm) == ["lost words"]


def test_retry_on_an_earlier_failed_message_sends_it_again_as_a_new_message(page, server, llm):
    new_session(page)
    llm.script(*[Reply(status=500, error="upstream down", for_user="first words")] * 3)
    wait_turn_done(page, send(page, "first words"))
    llm.reset()
    llm.script(Reply(text="Second answer.", for_user="second words"))
    wait_turn_done(page, send(page, "second words"))
    assert _user_texts_sent(llm) == ["second words"]  # the failed message is not glued onto it
    llm.reset()
    llm.script(Reply(text="First answer at last.", for_user="first words"))
    before = turns_done(page)
    page.locator("#messages .msg.msg-failed [data-action=retry]").click()
    wait_turn_done(page, before)
    expect(page.locator("#messages .msg-user .msg-body")).to_have_text(
        ["first words", "second words", "first words"]
    )
    expect(page.locator("#messages .msg-assistant .msg-body").last).to_have_text("First answer at last.")
    assert _user_texts_sent(llm) == ["second words", "first words"]

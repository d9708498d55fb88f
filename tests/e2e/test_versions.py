"""Versions on the page: an edit or a regenerate keeps the earlier answer, "‹ 1/2 ›" on the message switches,
the choice survives a reload, and the next turn is sent the version shown."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from talaria_testing.fake_llm import Reply

from .helpers import PHONE, new_session, screenshots, send, wait_turn_done

pytestmark = pytest.mark.e2e


def _edited_last_message(page, llm) -> str:
    llm.script(Reply(text="First answer."), Reply(text="Second answer."), Reply(text="Answer to the edit."))
    sid = new_session(page)
    wait_turn_done(page, send(page, "First question"))
    wait_turn_done(page, send(page, "Second question"))
    page.locator(".msg-user").nth(1).get_by_role("button", name="Edit your last message and resend").click()
    wait_turn_done(page, send(page, "Second question, edited"))
    expect(page.locator(".msg")).to_have_count(4)
    return sid


def _sent_texts(llm) -> list[str]:
    return [m["content"] for m in llm.chat_requests()[-1]["body"]["messages"] if m["role"] != "system"]


def test_an_edited_message_shows_its_versions_and_switches_between_them(page, server, llm):
    sid = _edited_last_message(page, llm)
    edited = page.locator(".msg-user").nth(1)
    control = edited.locator(".msg-versions")
    expect(control).to_be_visible()
    expect(control.locator(".msg-version-label")).to_have_text("2/2")
    expect(control.get_by_role("button", name="Next version")).to_be_disabled()
    expect(page.locator(".msg-user").first.locator(".msg-versions")).to_have_count(0)
    screenshots(page, "message-versions")

    control.get_by_role("button", name="Previous version").click()
    expect(page.locator(".msg-user").nth(1)).to_contain_text("Second question")
    expect(page.locator(".msg-user").nth(1)).not_to_contain_text("edited")
    expect(page.locator(".msg-assistant").last).to_contain_text("Second answer.")
    expect(page.locator(".msg-user").nth(1).locator(".msg-version-label")).to_have_text("1/2")

    page.reload()
    assert page.url.endswith(f"/s/{sid}")
    expect(page.locator(".msg-assistant").last).to_contain_text("Second answer.")
    expect(page.locator(".msg-user").nth(1).locator(".msg-version-label")).to_have_text("1/2")

    llm.script(Reply(text="Third answer."))
    wait_turn_done(page, send(page, "Third question"))
    assert _sent_texts(llm) == [
        "First question",
        "First answer.",
        "Second question",
        "Second answer.",
        "Third question",
    ]


def test_a_regenerated_answer_is_one_more_version_of_its_question(page, server, llm):
    _edited_last_message(page, llm)
    llm.script(Reply(text="A regenerated answer."))
    before = int(page.locator("#transcript").get_attribute("data-turns-done") or 0)
    page.locator(".msg-assistant").last.get_by_role("button", name="Regenerate the last answer").click()
    wait_turn_done(page, before)
    expect(page.locator(".msg-assistant").last).to_contain_text("A regenerated answer.")
    control = page.locator(".msg-user").nth(1).locator(".msg-versions")
    expect(control.locator(".msg-version-label")).to_have_text("3/3")
    control.get_by_role("button", name="Previous version").click()
    expect(page.locator(".msg-assistant").last).to_contain_text("Answer to the edit.")
    expect(control.locator(".msg-version-label")).to_have_text("2/3")


def test_the_version_control_fits_a_phone(page, server, llm):
    _edited_last_message(page, llm)
    page.set_viewport_size(PHONE)
    control = page.locator(".msg-user").nth(1).locator(".msg-versions")
    expect(control).to_be_visible()
    box = control.get_by_role("button", name="Previous version").bounding_box()
    assert box["width"] >= 24 and box["height"] >= 24  # a finger can hit it
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")

"""Two tabs open on one conversation: what one starts, the other shows live, and both end the same."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from talaria_testing.fake_llm import Reply

from .helpers import (
    GREETING,
    goto_app,
    import_session,
    open_tabs,
    screenshots,
    send,
    tabs_on_session,
    transcript_state,
    wait_turn_done,
)

pytestmark = pytest.mark.e2e

WORDS = " ".join(f"word{i}" for i in range(12))


def _sidebar_count(page, sid: str) -> str:
    return page.locator(f'.session-row[data-sid="{sid}"] .session-meta').inner_text()


def test_a_turn_started_in_one_tab_streams_live_in_the_other_and_both_end_identical(browser, server, llm):
    """A tab open on a session never showed a turn started in another tab, during it or after it: its
    transcript stayed as it was while its sidebar count moved on."""
    sid = import_session(server, "Shared between tabs", GREETING)["session_id"]
    llm.script(Reply(text=WORDS, hang_after=6))
    with tabs_on_session(browser, server, sid) as (first, second):
        expect(second.locator(".msg")).to_have_count(2)
        turn = send(first, "Tell me twelve words")
        assert llm.wait_for_hang()
        # The other tab learns of the turn from the feed and follows its stream: the question and the
        # answer so far, with the stop button, while the turn is still running.
        expect(second.locator(".msg-user")).to_have_count(2)
        expect(second.locator(".msg-user").last).to_contain_text("Tell me twelve words")
        expect(second.locator(".msg.live .live-text")).to_have_text(
            " ".join(f"word{i}" for i in range(6)) + " "
        )
        expect(second.locator("#stop")).to_be_visible()
        screenshots(second, "two-tabs-live-in-the-other")
        llm.release()
        wait_turn_done(first, turn)
        wait_turn_done(second, 0)
        expect(second.locator(".msg-assistant .msg-body").last).to_have_text(WORDS)
        assert transcript_state(second) == transcript_state(first)
        expect(second.locator(f'.session-row[data-sid="{sid}"] .session-meta')).to_have_text(
            _sidebar_count(first, sid)
        )


def test_a_tab_that_missed_a_turn_reads_the_transcript_again_when_the_feed_says_it_changed(
    browser, server, llm
):
    """A turn that ended elsewhere before this tab could follow it (here: through the HTTP API alone)
    still reaches the open transcript: the feed's row says the session changed, and the tab reads it."""
    sid = import_session(server, "Changed elsewhere", GREETING)["session_id"]
    with open_tabs(browser, server.base_url, 1) as (page,):
        goto_app(page, f"/#/s/{sid}")
        expect(page.locator(".msg")).to_have_count(2)
        server.post_json("/api/session/truncate", {"session_id": sid, "keep_count": 1})
        expect(page.locator(".msg")).to_have_count(1)
        expect(page.locator(f'.session-row[data-sid="{sid}"] .session-meta')).to_contain_text("1 message")


def test_sending_while_another_tab_streams_says_so_and_offers_to_follow(browser, server, llm):
    """Sending from a tab that did not know of the other tab's turn answered "A reply is still
    streaming" without saying where; the page now says so and offers to follow that turn."""
    sid = import_session(server, "Busy elsewhere", GREETING)["session_id"]
    llm.script(Reply(text=WORDS, hang_after=4))
    with open_tabs(browser, server.base_url, 1) as (page,):
        page.guard.allowed_statuses.add(409)
        # This tab does not follow the feed, as one whose connection keeps dropping.
        page.route("**/api/sessions/feed*", lambda route: route.abort("aborted"))
        goto_app(page, f"/#/s/{sid}")
        expect(page.locator(".msg")).to_have_count(2)
        started = server.post_json("/api/chat/start", {"session_id": sid, "message": "From elsewhere"})
        assert llm.wait_for_hang()
        page.locator("#composer-input").fill("Mine too")
        page.locator("#composer-input").press("Enter")
        notice = page.locator(".toast", has_text="another tab or window")
        expect(notice).to_be_visible()
        expect(page.locator("#composer-input")).to_have_value("Mine too")
        screenshots(page, "two-tabs-follow-offer")
        notice.locator(".toast-action").click()
        expect(page.locator(".msg.live .live-text")).to_have_text(
            " ".join(f"word{i}" for i in range(4)) + " "
        )
        assert started["stream_id"]
        llm.release()
        wait_turn_done(page, 0)
        expect(page.locator(".msg-assistant .msg-body").last).to_have_text(WORDS)

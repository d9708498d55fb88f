"""The unsent draft in the browser: kept on the server as the person types, back after a reload, on another
device and when the session is opened again; sending clears it."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from talaria_testing.fake_llm import Reply

from .helpers import goto_app, new_session, open_page, screenshots, send, wait_turn_done

pytestmark = pytest.mark.e2e

DRAFT = "A half-written question about the deploy"


def _type_and_wait_for_the_save(page, text: str) -> None:
    with page.expect_response(
        lambda r: r.url.endswith("/api/session/draft") and r.request.method == "POST"
    ) as saved:
        page.locator("#composer-input").fill(text)
    assert saved.value.ok


def test_a_draft_comes_back_after_a_reload_on_another_device_and_goes_once_sent(browser, server, llm):
    with open_page(browser, server.base_url) as page:
        sid = new_session(page)
        _type_and_wait_for_the_save(page, DRAFT)
        page.reload()
        goto_app(page, f"/#/s/{sid}")
        expect(page.locator("#composer-input")).to_have_value(DRAFT)
        screenshots(page, "draft-restored")

        # Another session has its own (empty) box; coming back brings the draft again.
        other = new_session(page)
        assert other != sid
        expect(page.locator("#composer-input")).to_have_value("")
        page.evaluate("sid => { location.hash = `#/s/${sid}`; }", sid)
        expect(page.locator("#composer-input")).to_have_value(DRAFT)

        with open_page(browser, server.base_url, color_scheme="dark") as phone:
            goto_app(phone, f"/#/s/{sid}")
            expect(phone.locator("#composer-input")).to_have_value(DRAFT)

        llm.script(Reply(text="Deploys run at noon."))
        before = send(page, DRAFT)
        wait_turn_done(page, before)
        page.reload()
        goto_app(page, f"/#/s/{sid}")
        expect(page.locator(".msg-assistant .msg-body").last).to_have_text("Deploys run at noon.")
        expect(page.locator("#composer-input")).to_have_value("")

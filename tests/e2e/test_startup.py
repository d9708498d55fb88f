"""What the page shows before the first message: the recovery banner after a restore, the login page."""

from __future__ import annotations

import re
import time

import pytest
from playwright.sync_api import expect

from .helpers import goto_app, open_page, screenshot, screenshots, session_store, start_server

pytestmark = pytest.mark.e2e

PASSWORD = "correct horse battery staple"


def test_recovery_banner_names_the_restored_session_and_links_the_audit(browser, llm, tmp_path):
    ids = {}

    def prepare(server):
        base = time.time() - 60
        with session_store(server.session_dir) as models:
            turns = [
                {"role": "user" if i % 2 == 0 else "assistant", "content": f"line {i}", "timestamp": base + i}
                for i in range(6)
            ]
            session = models.Session(title="Lost and found", messages=turns)
            session.save(skip_index=True)
            session.messages = turns[:2]  # a shrink nobody asked for: the save keeps a .bak
            session.save(skip_index=True)
            ids["sid"] = session.session_id

    server = start_server(tmp_path / "srv", llm, prepare=prepare)
    try:
        assert server.get_json("/api/recovery/startup")["restored"] == 1
        with open_page(browser, server.base_url) as page:
            goto_app(page)
            banner = page.locator("#recovery-banner")
            expect(banner).to_be_visible()
            expect(banner).to_contain_text("Recovered 1 session")
            expect(banner.get_by_role("link", name="Lost and found")).to_be_visible()
            screenshots(page, "recovery-banner")
            # The report is a readable page: titles and file names, no folder of the server's disk.
            banner.get_by_role("button", name="See the recovery report").click()
            report = page.locator("dialog.modal")
            expect(report).to_contain_text("Lost and found")
            expect(report).to_contain_text("was restored from its backup (2 → 6 messages)")
            assert str(server.root) not in report.text_content()
            assert f"{ids['sid']}.json" in report.text_content() or "healthy" in report.text_content()
            screenshots(page, "recovery-report")
            report.get_by_role("button", name="Close").click()
            banner.get_by_role("link", name="Lost and found").click()
            expect(page.locator(".msg")).to_have_count(6)
            banner.get_by_role("button", name="Dismiss the recovery notice").click()
            expect(banner).to_be_hidden()
            # Dismissed stays dismissed across a reload.
            page.reload()
            page.wait_for_selector("#app:not([hidden])")
            expect(page.locator(".msg")).to_have_count(6)
            expect(banner).to_be_hidden()
    finally:
        server.stop()


def test_login_page_guards_the_app_and_posts_carry_the_csrf_token(browser, llm, tmp_path):
    server = start_server(tmp_path / "srv", llm, password=PASSWORD)
    try:
        with open_page(browser, server.base_url) as page:
            page.goto(server.base_url + "/")
            expect(page.locator("#login")).to_be_visible()
            expect(page.locator("#app")).to_be_hidden()
            screenshot(page, "login")
            page.fill("#login-password", PASSWORD)
            page.press("#login-password", "Enter")
            expect(page.locator("#app")).to_be_visible()
            page.click("#new-session")  # a POST: refused without the CSRF header
            page.wait_for_url(re.compile(r"#/s/[A-Za-z0-9_-]+$"))
            expect(page.locator("#chat-title")).to_have_text("Untitled")
            page.reload()  # the cookie keeps the login; /api/auth/status hands the CSRF token back
            expect(page.locator("#app")).to_be_visible()
            expect(page.locator("#chat-title")).to_have_text("Untitled")
            send_title = page.locator("#composer-input")
            send_title.fill("/title Guarded")
            send_title.press("Enter")
            expect(page.locator("#chat-title")).to_have_text("Guarded")
            expect(page.locator("#logout")).to_be_visible()
    finally:
        server.stop()


def test_agent_sessions_from_other_platforms_open_as_the_agent_stored_them(browser, llm, tmp_path):
    def prepare(server):
        from hermes_state import SessionDB

        db = SessionDB(server.hermes_home / "state.db")
        try:
            db.create_session("tg_chat_1", "telegram", model="fake-model")
            db.set_session_title("tg_chat_1", "Groceries on Telegram")
            db.append_message("tg_chat_1", "user", "Remind me to buy oat milk")
            db.append_message("tg_chat_1", "assistant", "Noted: **oat milk** is on the list.")
        finally:
            db.close()

    server = start_server(tmp_path / "srv", llm, prepare=prepare)
    try:
        with open_page(browser, server.base_url) as page:
            goto_app(page)
            expect(page.locator("#session-list .group-title", has_text="Other platforms")).to_be_visible()
            row = page.locator("#session-list .agent-row", has_text="Groceries on Telegram")
            expect(row.locator(".session-meta")).to_contain_text("telegram")
            row.locator(".session-open").click()
            expect(page.locator(".msg")).to_have_count(2)
            expect(page.locator(".msg-assistant strong")).to_have_text("oat milk")
            expect(page.locator("#read-only-note")).to_contain_text("comes from telegram")
            # Sending continues it in a Talaria session (tests/e2e/test_agent_sessions.py).
            expect(page.locator("#composer-input")).to_be_enabled()
            expect(page.locator("#export-menu")).to_be_hidden()
            expect(page.locator(".edit-last")).to_have_count(0)
            screenshot(page, "agent-session-read-only")
    finally:
        server.stop()

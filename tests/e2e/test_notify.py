"""Browser notifications in Chromium: a hidden tab tells of a finished answer and of an approval that waits,
a visible tab stays quiet, tabs of one browser notify once, and a click opens the session.

The page's visibility is emulated (``document.visibilityState`` follows ``window.__visibility``) and every
``Notification`` the page makes is recorded in ``window.__notes``; the real constructor still runs.
"""

from __future__ import annotations

import contextlib

import pytest
from playwright.sync_api import expect

from talaria_testing.fake_llm import Reply

from .helpers import asking_server, goto_app, open_tabs, screenshots, send, wait_turn_done

pytestmark = pytest.mark.e2e

WATCH = """
(() => {
  const Real = window.Notification;
  window.__visibility = "visible";
  window.__notes = [];
  Object.defineProperty(Document.prototype, "visibilityState", { get: () => window.__visibility, configurable: true });
  Object.defineProperty(Document.prototype, "hidden", { get: () => window.__visibility === "hidden", configurable: true });
  window.Notification = class extends Real {
    constructor(title, options = {}) {
      super(title, options);
      window.__notes.push({ title, body: options.body, tag: options.tag });
      (window.__shown ||= []).push(this);
    }
  };
})();
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory, llm):
    with asking_server(tmp_path_factory.mktemp("talaria-e2e-notify"), llm, "terminal") as srv:
        yield srv


@contextlib.contextmanager
def watched_tabs(browser, server, count=1, permissions=("notifications",)):
    with open_tabs(
        browser, server.base_url, count, permissions=permissions, service_workers="allow"
    ) as pages:
        pages[0].context.add_init_script(WATCH)
        yield pages


def open_session(page, sid: str) -> None:
    goto_app(page, f"/#/s/{sid}")
    expect(page.locator("#chat-title")).to_have_text("Untitled")


def switch_on(page) -> None:
    toggle = page.locator("#notify-toggle")
    expect(toggle).to_have_text("Notify me")
    toggle.click()
    expect(toggle).to_have_text("Notifying")
    expect(toggle).to_have_attribute("aria-pressed", "true")


def notes(page) -> list[dict]:
    return page.evaluate("window.__notes")


def hide(page, hidden=True) -> None:
    page.evaluate("(h) => { window.__visibility = h ? 'hidden' : 'visible'; }", hidden)


def new_sid(server) -> str:
    return server.post_json("/api/session/new", {})["session"]["session_id"]


def test_a_hidden_tab_notifies_once_when_the_answer_is_ready_and_a_visible_one_does_not(browser, server, llm):
    with watched_tabs(browser, server) as (page,):
        sid = new_sid(server)
        open_session(page, sid)
        switch_on(page)
        llm.script(Reply(text="Seen it."))
        turn = send(page, "while I look")
        wait_turn_done(page, turn)
        page.wait_for_timeout(500)  # the feed's copy of the same end arrives too
        assert notes(page) == []
        hide(page)
        llm.script(Reply(text="Ready now."))
        turn = send(page, "while I am away")
        wait_turn_done(page, turn)
        page.wait_for_timeout(500)
        got = notes(page)
        assert len(got) == 1, got
        assert got[0]["title"] == "Hermes answered"
        assert got[0]["tag"].startswith(f"talaria:done:{sid}:")


def test_a_hidden_tab_notifies_when_an_approval_waits(browser, server, llm):
    with watched_tabs(browser, server) as (page,):
        folder = server.root / "victims" / "notify"
        folder.mkdir(parents=True)
        sid = new_sid(server)
        open_session(page, sid)
        switch_on(page)
        call = {"id": "call_rm", "name": "terminal", "arguments": {"command": f"rm -rf {folder}"}}
        llm.script(Reply(tool_calls=[call]), Reply(text="Left it."))
        hide(page)
        turn = send(page, "tidy up that folder")
        expect(page.locator(".approval-card")).to_be_visible()
        page.wait_for_function("() => window.__notes.length >= 1")
        first = notes(page)[0]
        assert first["title"] == "Hermes asks for approval"
        assert first["tag"].startswith(f"talaria:approval:{sid}:")
        page.locator(".approval-card button", has_text="Deny").click()
        wait_turn_done(page, turn)
        page.wait_for_timeout(500)
        assert [n["title"] for n in notes(page)] == ["Hermes asks for approval", "Hermes answered"]
        assert folder.is_dir()


def test_two_hidden_tabs_of_one_browser_notify_once_for_one_answer(browser, server, llm):
    with watched_tabs(browser, server, count=2) as pages:
        sid = new_sid(server)
        for page in pages:
            open_session(page, sid)
        switch_on(pages[0])
        for page in pages:
            page.reload()
            page.wait_for_selector("#app:not([hidden])")
            expect(page.locator("#notify-toggle")).to_have_text("Notifying")
            hide(page)
        llm.script(Reply(text="One answer."))
        turn = send(pages[0], "both tabs are hidden")
        wait_turn_done(pages[0], turn)
        wait_turn_done(pages[1], 0)
        pages[0].wait_for_timeout(800)
        got = notes(pages[0]) + notes(pages[1])
        assert len(got) == 1, got


def test_clicking_the_notification_of_another_session_opens_it(browser, server, llm):
    with watched_tabs(browser, server) as (page,):
        elsewhere, here = new_sid(server), new_sid(server)
        open_session(page, here)
        switch_on(page)
        hide(page)
        llm.script(Reply(text="Done elsewhere."))
        server.post_json("/api/chat/start", {"session_id": elsewhere, "message": "run over there"})
        page.wait_for_function("() => window.__notes.length >= 1", timeout=30000)
        assert notes(page)[0]["tag"].startswith(f"talaria:done:{elsewhere}:")
        hide(page, False)
        page.evaluate("window.__shown[0].dispatchEvent(new Event('click'))")
        page.wait_for_url(f"**/#/s/{elsewhere}")
        expect(page.locator(".msg-assistant .msg-body").last).to_have_text("Done elsewhere.")


def test_the_control_asks_permission_only_when_clicked(browser, server):
    with watched_tabs(browser, server, permissions=()) as (page,):
        # Headless Chromium answers "denied" by itself; a browser that has not asked yet says "default".
        page.context.add_init_script(
            """
            Object.defineProperty(Notification, "permission", { get: () => window.__perm || "default" });
            Notification.requestPermission = async () => {
              window.__asked = (window.__asked || 0) + 1;
              window.__perm = "granted";
              return "granted";
            };
            """
        )
        goto_app(page)
        expect(page.locator("#notify-toggle")).to_have_text("Notify me")
        assert page.evaluate("window.__asked || 0") == 0
        page.evaluate("document.getElementById('app').classList.add('sidebar-open')")
        screenshots(page, "notify-toggle-off")
        page.locator("#notify-toggle").click()
        expect(page.locator("#notify-toggle")).to_have_text("Notifying")
        assert page.evaluate("window.__asked") == 1


def test_the_control_says_when_the_browser_blocks_notifications(browser, server):
    with watched_tabs(browser, server, permissions=()) as (page,):
        page.context.add_init_script(
            'Object.defineProperty(Notification, "permission", { get: () => "denied" });'
        )
        goto_app(page)
        expect(page.locator("#notify-toggle")).to_have_text("Notifications blocked")
        expect(page.locator("#notify-toggle")).to_be_disabled()


def test_the_control_shows_when_notifications_are_on(browser, server):
    with watched_tabs(browser, server) as (page,):
        goto_app(page)
        switch_on(page)
        page.evaluate("document.getElementById('app').classList.add('sidebar-open')")
        screenshots(page, "notify-toggle-on")

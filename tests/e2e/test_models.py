"""The model picker, the tools menu and the setup form in a real browser, against the real server and agent."""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import expect

from talaria_testing.fake_llm import FakeLLM, Reply
from talaria_testing.server_proc import ServerProc

from .helpers import DESKTOP, PHONE, goto_app, new_session, open_page, screenshot, send, wait_turn_done

pytestmark = pytest.mark.e2e

CHOICE_B = json.dumps(["custom", "fake-b"], separators=(",", ":"))  # the option value the page writes


@pytest.fixture(scope="module")
def two_models():
    with FakeLLM(extra_models=("fake-b",)) as server:
        yield server


@pytest.fixture
def fake(two_models):
    with two_models.fresh():
        yield two_models


@pytest.fixture(scope="module")
def picker_server(tmp_path_factory, two_models):
    from .helpers import start_server

    server = start_server(tmp_path_factory.mktemp("models-e2e"), two_models)
    yield server
    server.stop()


def _screens(page, name: str) -> None:
    """Desktop and phone width, light and dark."""
    for size, size_name in ((DESKTOP, "desktop"), (PHONE, "phone")):
        page.set_viewport_size(size)
        page.wait_for_timeout(300)  # the sidebar slides away when the width crosses the phone breakpoint
        for scheme in ("light", "dark"):
            page.emulate_media(color_scheme=scheme)
            screenshot(page, f"{name}-{size_name}-{scheme}")
    page.set_viewport_size(DESKTOP)
    page.emulate_media(color_scheme="light")


def test_the_picker_switches_the_model_of_the_next_answer(browser, picker_server, fake):
    with open_page(browser, picker_server.base_url) as page:
        new_session(page)
        picker = page.locator("#model-select")
        expect(page.locator("#model-picker")).to_be_visible()
        expect(picker).to_have_value("")
        expect(picker.locator("option")).to_have_text(
            ["Default (fake-model)", "fake-model", "fake-b", "Set up a model…"]
        )
        fake.script(Reply(text="from the default"), Reply(text="from model b"))
        wait_turn_done(page, send(page, "first"))
        expect(page.locator(".msg-assistant .msg-model").last).to_have_text("fake-model")

        picker.select_option(CHOICE_B)
        expect(page.locator(".toast").last).to_contain_text("fake-b")
        wait_turn_done(page, send(page, "second"))
        assert fake.chat_requests()[-1]["body"]["model"] == "fake-b"
        expect(page.locator(".msg-assistant .msg-model")).to_have_text(["fake-model", "fake-b"])
        expect(picker).to_have_value(CHOICE_B)

        page.reload()
        page.wait_for_selector("#app:not([hidden])")
        expect(page.locator("#model-select")).to_have_value(CHOICE_B)
        _screens(page, "model-picker")


def test_the_tools_menu_switches_toolsets_for_the_session(browser, picker_server, fake):
    with open_page(browser, picker_server.base_url) as page:
        sid = new_session(page)
        summary = page.locator("#tools-summary")
        expect(summary).to_have_text("Tools")
        summary.click()
        expect(summary).to_have_text("Tools 1")  # the server's default: todo
        panel = page.locator(".tools-panel")
        expect(panel.locator(".toolset-row", has_text="Task Planning").locator("input")).to_be_checked()
        # The server allows todo only (TALARIA_AGENT_TOOLSETS=todo): the others are listed, off, and say why.
        blocked = panel.locator(".toolset-unavailable")
        expect(blocked.locator(".toolset-reason")).to_have_text(
            "Not allowed on this server (TALARIA_AGENT_TOOLSETS=todo)"
        )
        expect(blocked.locator(".toolset-row", has_text="Session Search").locator("input")).to_be_disabled()
        expect(blocked.locator(".toolset-row", has_text="Task Planning")).to_have_count(0)
        _screens(page, "tools-menu")
        panel.locator(".toolset-row", has_text="Task Planning").locator("input").uncheck()
        expect(summary).to_have_text("Tools 0")
        assert picker_server.get_json(f"/api/toolsets?session_id={sid}")["enabled_toolsets"] == []

        fake.script(Reply(text="without tools"))
        page.keyboard.press("Escape")
        page.locator("#chat-title").click()
        wait_turn_done(page, send(page, "hello"))
        assert not fake.chat_requests()[-1]["body"].get("tools")

        summary.click()
        page.locator("#tools-reset").click()
        expect(summary).to_have_text("Tools 1")
        assert picker_server.get_json(f"/api/toolsets?session_id={sid}")["enabled_toolsets"] is None


def test_the_setup_form_gets_an_empty_home_to_a_streamed_answer(browser, two_models, tmp_path):
    two_models.reset()
    server = ServerProc(tmp_path, env={"TALARIA_AGENT_TOOLSETS": "none"})
    with server, open_page(browser, server.base_url) as page:
        page.guard.allowed_statuses.add(400)  # the refused URL below
        goto_app(page)
        dialog = page.locator("#setup-dialog")
        expect(dialog).to_be_visible()
        _screens(page, "setup-form")

        page.fill("#setup-base-url", "ftp://127.0.0.1/v1")
        page.fill("#setup-model", "fake-b")
        page.click("#setup-save")
        expect(page.locator("#setup-result")).to_contain_text("http://")
        expect(dialog).to_be_visible()
        assert not (server.hermes_home / "config.yaml").exists()
        # The browser logs the refused request; that one message is expected, nothing else.
        page.guard.problems = [p for p in page.guard.problems if "status of 400" not in p]

        page.fill("#setup-base-url", two_models.base_url)
        page.fill("#setup-key", "sk-browser-5678")
        page.fill("#setup-model", "")
        page.click("#setup-test")
        expect(page.locator("#setup-result")).to_have_text("Connected: 2 models available.")
        expect(page.locator("#setup-model")).to_have_value("fake-model")
        _screens(page, "setup-form-tested")
        page.fill("#setup-model", "fake-b")
        page.click("#setup-save")
        expect(dialog).to_be_hidden()
        expect(page.locator(".toast").last).to_contain_text("fake-b")

        page.click("#new-session")
        expect(page.locator("#model-select option").first).to_have_text("Default (fake-b)")
        two_models.script(Reply(text="Hello from the new setup."))
        wait_turn_done(page, send(page, "are you there?"))
        expect(page.locator(".msg-assistant").last).to_contain_text("Hello from the new setup.")
        request = two_models.chat_requests()[-1]
        assert request["body"]["model"] == "fake-b"
        assert request["headers"]["Authorization"] == "Bearer sk-browser-5678"
        assert "sk-browser-5678" not in page.content()

"""The model picker, the tools menu and the setup form in a real browser, against the real server and agent."""

from __future__ import annotations

import json
import re

import pytest
import yaml
from playwright.sync_api import expect

from talaria_testing import mcp_server
from talaria_testing.fake_llm import FakeLLM, Reply, agent_server
from talaria_testing.server_proc import ServerProc

from .helpers import (
    goto_app,
    new_session,
    open_page,
    screenshots,
    send,
    wait_turn_done,
)

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
        screenshots(page, "model-picker")


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
        search = blocked.filter(has_text="Session Search")
        expect(search.locator(".toolset-reason")).to_have_text(
            "Not allowed on this server (TALARIA_AGENT_TOOLSETS=todo)"
        )
        expect(search.locator("input")).to_be_disabled()
        expect(blocked.filter(has_text="Task Planning")).to_have_count(0)
        screenshots(page, "tools-menu")
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
        screenshots(page, "setup-form")

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
        screenshots(page, "setup-form-tested")
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


def test_the_tools_menu_shows_each_mcp_servers_state(browser, two_models, tmp_path):
    servers = {"demo": mcp_server.entry("ok"), "stuck": mcp_server.entry("hang")}
    server = agent_server(tmp_path, two_models.base_url, toolsets="todo,demo", extra={"mcp_servers": servers})
    with server, open_page(browser, server.base_url) as page:
        mcp_server.wait_for_states(server, {"demo": "connected", "stuck": "failed"})
        new_session(page)
        page.locator("#tools-summary").click()
        panel = page.locator(".tools-panel")
        demo = panel.locator(".toolset-row", has_text="MCP: demo")
        expect(demo.locator("input")).to_be_checked()
        expect(demo.locator(".toolset-mcp")).to_have_text(re.compile(r"^connected · \d+ tools$"))
        stuck = panel.locator(".toolset-row", has_text="MCP: stuck")
        expect(stuck.locator(".toolset-mcp-failed")).to_contain_text("not connected:")
        screenshots(page, "tools-menu-mcp")


def test_the_reasoning_picker_shows_for_a_model_that_takes_an_effort_and_sets_it(browser, tmp_path):
    with FakeLLM() as studio:
        studio.reasoning_options = ("off", "low", "medium", "high")
        extra = {"model": {"provider": "lmstudio"}, "agent": {"reasoning_effort": "low"}}
        server = agent_server(tmp_path, studio.base_url, toolsets="todo", extra=extra)
        with server, open_page(browser, server.base_url) as page:
            new_session(page)
            picker = page.locator("#reasoning-select")
            expect(page.locator("#reasoning-picker")).to_be_visible()
            expect(picker.locator("option").first).to_have_text("Reasoning: default (low)")
            picker.select_option("high")
            expect(page.locator(".toast").last).to_contain_text("Reasoning effort: high")
            studio.script(Reply(text="after thinking hard"))
            wait_turn_done(page, send(page, "think"))
            assert studio.chat_requests()[-1]["body"]["reasoning_effort"] == "high"
            screenshots(page, "reasoning-picker")
            page.locator("#composer-input").fill("/reasoning medium")
            page.locator("#composer-input").press("Enter")
            expect(picker).to_have_value("medium")
            expect(page.locator(".toast").last).to_contain_text("Reasoning effort: medium")


def test_a_model_whose_route_takes_no_effort_shows_no_reasoning_picker(browser, picker_server):
    with open_page(browser, picker_server.base_url) as page:
        with page.expect_response(lambda response: "/api/reasoning" in response.url) as asked:
            new_session(page)
        assert asked.value.json()["supported"] is False
        expect(page.locator("#reasoning-picker")).to_be_hidden()


def _options(page) -> list[str]:
    return page.locator("#model-select option").all_inner_texts()


def test_refresh_offers_every_model_the_endpoint_lists_now(browser, two_models, tmp_path):
    """Issue 19.13: after the setup form (no key) the picker kept the list of the first answer for good."""
    two_models.reset()
    two_models.extra_models = ("fake-b",)
    server = ServerProc(tmp_path, env={"TALARIA_AGENT_TOOLSETS": "none"})
    try:
        with server, open_page(browser, server.base_url) as page:
            server.post_json(
                "/api/onboarding/setup",
                {"kind": "custom", "base_url": two_models.base_url, "model": "fake-b"},
            )
            new_session(page)
            expect(page.locator("#model-select option")).to_have_count(4)
            assert _options(page) == ["Default (fake-b)", "fake-model", "fake-b", "Set up a model…"]
            two_models.extra_models = ("fake-b", "fake-c")
            page.click("#model-refresh")
            expect(page.locator("#model-select option")).to_have_count(5)
            assert _options(page) == ["Default (fake-b)", "fake-model", "fake-b", "fake-c", "Set up a model…"]
    finally:
        two_models.extra_models = ("fake-b",)


def test_later_leaves_a_notice_and_a_turn_without_a_model_offers_the_setup_form(browser, tmp_path):
    """Issue 19.20: after "Later" nothing said no model was set; the turn's error flattened its YAML
    example into one line and had no way back to the form; a failed test stayed after switching kind."""
    server = ServerProc(tmp_path, env={"TALARIA_AGENT_TOOLSETS": "none"})
    with server, open_page(browser, server.base_url) as page:
        goto_app(page)
        dialog = page.locator("#setup-dialog")
        expect(dialog).to_be_visible()
        page.fill("#setup-base-url", "http://127.0.0.1:9/v1")
        page.click("#setup-test")
        expect(page.locator("#setup-result")).to_contain_text("Cannot connect")
        page.check("input[name=kind][value=provider]")
        expect(page.locator("#setup-result")).to_have_text("")
        expect(page.locator("#setup-vision-row")).to_be_hidden()
        page.check("input[name=kind][value=custom]")
        page.click("#setup-cancel")
        expect(dialog).to_be_hidden()

        notice = page.locator("#no-model-notice")
        expect(notice).to_be_visible()
        expect(notice).to_contain_text("No model is set up yet")
        page.click("#new-session")
        page.wait_for_url(re.compile(r"#/s/[A-Za-z0-9_-]+$"))
        wait_turn_done(page, send(page, "hello?"))
        failed = page.locator(".msg-assistant.msg-failed").last
        expect(failed.locator("pre")).to_contain_text("model:\n  provider: custom\n")
        failed.locator("button.msg-setup").click()
        expect(dialog).to_be_visible()
        page.click("#setup-cancel")
        notice.locator("button").click()
        expect(dialog).to_be_visible()
        page.click("#setup-cancel")
        expect(notice).to_be_visible()


def test_the_tools_menu_shows_a_toolset_that_cannot_work_as_unavailable(browser, picker_server, fake):
    """Issue 19.20: web search was offered (and ticked when chosen) without a search key."""
    with open_page(browser, picker_server.base_url) as page:
        new_session(page)
        page.locator("#tools-summary").click()
        web = page.locator(".toolset-row", has_text="Web Search")
        expect(web.locator("input")).to_be_disabled()
        expect(web.locator("input")).not_to_be_checked()
        expect(web.locator(".toolset-reason")).to_contain_text("EXA_API_KEY")
        expect(page.locator(".toolset-row", has_text="Task Planning").locator("input")).to_be_enabled()


def test_the_setup_form_marks_a_custom_model_as_able_to_see_images(browser, two_models, tmp_path):
    """Issue 19.16: nothing let a person say their custom model sees images; the switch is the agent's own."""
    two_models.reset()
    server = ServerProc(tmp_path, env={"TALARIA_AGENT_TOOLSETS": "none"})
    with server, open_page(browser, server.base_url) as page:
        goto_app(page)
        page.fill("#setup-base-url", two_models.base_url)
        page.fill("#setup-model", "fake-b")
        page.check("#setup-vision")
        page.click("#setup-save")
        expect(page.locator("#setup-dialog")).to_be_hidden()
        expect(page.locator("#no-model-notice")).to_be_hidden()
        config = yaml.safe_load((server.hermes_home / "config.yaml").read_text(encoding="utf-8"))
        assert config["model"]["supports_vision"] is True
        page.click("#new-session")
        page.locator("#model-select").select_option("__setup__")
        expect(page.locator("#setup-vision")).to_be_checked()

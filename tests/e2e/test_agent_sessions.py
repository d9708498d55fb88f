"""The agent's own conversations in the sidebar: filtered by source (cron hidden by default) and continued
here by sending a message, in Debian's Chromium against the real server."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from playwright.sync_api import expect

from talaria_testing import agent_sessions as agent
from talaria_testing.fake_llm import Reply

from .helpers import PHONE, goto_app, open_page, screenshot, screenshots, send, start_server, wait_turn_done

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def server(tmp_path_factory, llm):
    def prepare(srv):
        agent.write_agent_sessions(Path(srv.hermes_home) / "state.db")

    with start_server(tmp_path_factory.mktemp("agent-sessions"), llm, prepare=prepare) as srv:
        yield srv


@pytest.fixture
def page(browser, server):
    with open_page(browser, server.base_url) as page:
        yield page


def agent_row(page, sid: str):
    return page.locator(f'#session-list .agent-row[data-sid="{sid}"]')


def test_cron_runs_are_hidden_until_their_source_is_chosen(page, server):
    goto_app(page)
    expect(agent_row(page, agent.CLI_TIP)).to_be_visible()
    expect(agent_row(page, agent.TELEGRAM)).to_be_visible()
    expect(agent_row(page, agent.CRON)).to_have_count(0)
    cron = page.locator('.source-chip[data-source="cron"]')
    expect(cron).to_have_attribute("aria-pressed", "false")
    screenshots(page, "agent-sources-default")
    page.locator('.source-chip[data-source="telegram"]').click()
    cron.click()
    expect(agent_row(page, agent.CRON)).to_be_visible()
    expect(agent_row(page, agent.TELEGRAM)).to_have_count(0)
    page.reload()
    page.wait_for_selector(f'.agent-row[data-sid="{agent.CRON}"]')
    expect(agent_row(page, agent.TELEGRAM)).to_have_count(0)
    screenshots(page, "agent-sources-cron-chosen")


def test_sending_in_a_cli_conversation_continues_it_here_with_its_history(page, server, llm):
    db_path = Path(server.hermes_home) / "state.db"
    before = agent.snapshot(db_path)
    goto_app(page)
    agent_row(page, agent.CLI_TIP).click()
    expect(page.locator("#read-only-note")).to_contain_text("continues it here")
    expect(page.locator(".msg-assistant")).to_have_count(2)
    screenshots(page, "agent-session-before-continuing")
    llm.script(Reply(text="The parser is **next**."))
    done = send(page, "what is left?")
    page.wait_for_url(re.compile(r"#/s/[A-Za-z0-9_-]+$"))
    wait_turn_done(page, done)
    assert agent.CLI_TIP not in page.url
    expect(page.locator(".msg-assistant").last).to_contain_text("The parser is next.")
    expect(page.locator(".msg-user")).to_have_count(3)
    expect(page.locator("#read-only-note")).to_be_hidden()
    expect(agent_row(page, agent.CLI_TIP)).to_have_count(0)
    sent = [m.get("content") for m in llm.chat_requests()[-1]["body"]["messages"]]
    assert "lexer done, zebrafish" in sent and sent[-1] == "what is left?"
    screenshots(page, "agent-session-continued")
    agent_ids = {row[0] for row in before[0]}
    sessions_after, messages_after = agent.snapshot(db_path)
    assert [r for r in sessions_after if r[0] in agent_ids] == before[0]
    assert [m for m in messages_after if m[1] in agent_ids] == before[1]


def test_a_session_the_agent_writes_while_the_page_is_open_appears_without_a_reload(page, server):
    goto_app(page)
    expect(agent_row(page, agent.TELEGRAM)).to_be_visible()
    page.evaluate("window.__sameDocument = true")
    agent.add_agent_session(
        Path(server.hermes_home) / "state.db", "discord_live", "discord", "Raid night", "who is in?"
    )
    expect(agent_row(page, "discord_live")).to_contain_text("Raid night", timeout=10000)
    expect(page.locator('.source-chip[data-source="discord"]')).to_have_attribute("aria-pressed", "true")
    assert page.evaluate("window.__sameDocument") is True


def test_content_search_finds_a_word_in_an_agent_conversation_and_opens_it_there(page, server):
    goto_app(page)
    page.fill("#session-filter", "milk")
    match = page.locator(".matches .session-row", has_text="Groceries")
    match.wait_for()
    assert "milk" in match.locator(".session-snippet").inner_text()
    match.locator(".session-open").click()
    page.wait_for_url(re.compile(f"#/s/{agent.TELEGRAM}$"))
    # The row is drawn before its text is filled in: the check waits for the text.
    expect(page.locator('.msg[data-idx="0"]')).to_contain_text("buy milk")
    expect(page.locator("#read-only-note")).to_be_visible()


def test_the_source_filter_fits_the_phone_drawer(browser, server):
    with open_page(browser, server.base_url, viewport=PHONE, color_scheme="dark") as page:
        goto_app(page)
        page.click("#open-sidebar")
        page.wait_for_function("() => document.getElementById('sidebar').getBoundingClientRect().left >= 0")
        chips = page.locator(".source-filter")
        expect(chips.locator(".source-chip")).not_to_have_count(0)
        box = chips.bounding_box()
        assert box and box["x"] >= 0 and box["x"] + box["width"] <= 390
        assert page.evaluate("document.documentElement.scrollWidth") <= 390
        screenshot(page, "agent-sources-phone-drawer-dark")
        page.emulate_media(color_scheme="light")
        screenshot(page, "agent-sources-phone-drawer-light")

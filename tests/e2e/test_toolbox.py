"""The agent's toolbox in a real browser: memory edited beside the agent's own writes, skills switched and
edited and used from the composer, the MCP servers' state; the composer's agent commands and the refusal to
send an unknown /word by accident. The real server, agent and MCP server; the fake LLM."""

from __future__ import annotations

import re

import pytest
import yaml
from playwright.sync_api import expect

from talaria_testing import mcp_server
from talaria_testing.fake_llm import FakeLLM, Reply, agent_server

from .helpers import new_session, open_page, screenshots, send, wait_turn_done

pytestmark = pytest.mark.e2e

SKILL = "---\nname: greet\ndescription: Greet someone warmly\n---\n# Greet\nSay hello by name.\n"


@pytest.fixture(scope="module")
def fake():
    with FakeLLM() as server:
        yield server


@pytest.fixture(scope="module")
def toolbox_server(tmp_path_factory, fake):
    extra = {
        "memory": {"memory_enabled": True, "user_profile_enabled": True},
        "mcp_servers": {"demo": mcp_server.entry("ok"), "stuck": mcp_server.entry("hang")},
    }
    server = agent_server(tmp_path_factory.mktemp("toolbox"), fake.base_url, toolsets="memory", extra=extra)
    skill = server.hermes_home / "skills" / "social" / "greet" / "SKILL.md"
    skill.parent.mkdir(parents=True)
    skill.write_text(SKILL, encoding="utf-8")
    memories = server.hermes_home / "memories"
    memories.mkdir(parents=True, exist_ok=True)
    (memories / "MEMORY.md").write_text("The project indents with tabs.", encoding="utf-8")
    with server:
        mcp_server.wait_for_states(server, {"demo": "connected", "stuck": "failed"})
        yield server


def _open(page, tab: str):
    page.locator("#open-toolbox").click()
    dialog = page.locator("dialog.toolbox")
    expect(dialog).to_be_visible()
    dialog.locator(".toolbox-tab", has_text=tab).click()
    return dialog


def test_memory_is_edited_and_a_write_by_the_agent_meanwhile_is_shown_not_overwritten(
    browser, toolbox_server
):
    memory = toolbox_server.hermes_home / "memories" / "MEMORY.md"
    with open_page(browser, toolbox_server.base_url) as page:
        page.guard.allowed_statuses.add(409)
        new_session(page)
        dialog = _open(page, "Memory")
        notes = dialog.get_by_label("MEMORY.md")
        expect(notes).to_have_value("The project indents with tabs.")
        expect(dialog.locator(".toolbox-file").first).to_contain_text("30 / 2,200 characters")
        screenshots(page, "toolbox-memory")

        notes.fill("The project indents with tabs.\n§\nTests live in tests/.")
        dialog.locator(".toolbox-file").first.get_by_role("button", name="Save").click()
        expect(page.locator(".toast").last).to_contain_text("Saved.")
        assert memory.read_text(encoding="utf-8").endswith("Tests live in tests/.")

        memory.write_text("Written by the agent meanwhile.", encoding="utf-8")
        notes.fill("The person's newer text.")
        dialog.locator(".toolbox-file").first.get_by_role("button", name="Save").click()
        conflict = dialog.locator(".toolbox-conflict").first
        expect(conflict).to_contain_text("Written by the agent meanwhile.")
        assert memory.read_text(encoding="utf-8") == "Written by the agent meanwhile."
        screenshots(page, "toolbox-memory-conflict")
        conflict.get_by_role("button", name="Use theirs").click()
        expect(notes).to_have_value("Written by the agent meanwhile.")


def test_a_skill_is_switched_off_and_on_edited_and_used_from_the_composer(browser, toolbox_server, fake):
    config = toolbox_server.hermes_home / "config.yaml"
    with open_page(browser, toolbox_server.base_url) as page:
        new_session(page)
        dialog = _open(page, "Skills")
        row = dialog.locator(".toolbox-row", has_text="greet")
        expect(row).to_contain_text("Greet someone warmly")
        expect(row.locator(".toolbox-badge")).to_have_text("yours")
        screenshots(page, "toolbox-skills")
        row.get_by_role("checkbox").uncheck()
        expect(page.locator(".toast").last).to_contain_text("greet is off")
        assert yaml.safe_load(config.read_text())["skills"]["disabled"] == ["greet"]
        row.get_by_role("checkbox").check()
        expect(page.locator(".toast").last).to_contain_text("greet is on")

        row.get_by_role("button", name="Edit").click()
        editor = dialog.get_by_label("greet")
        expect(editor).to_have_value(SKILL)
        editor.fill(SKILL.replace("Say hello by name.", "Say hello by name, then wave."))
        dialog.get_by_role("button", name="Save").click()
        expect(page.locator(".toast").last).to_contain_text("Saved.")
        screenshots(page, "toolbox-skill-edit")
        dialog.get_by_role("button", name="Close").click()

        page.locator("#composer-input").fill("/gr")
        expect(page.locator("#slash-list")).to_contain_text("/greet")
        fake.script(Reply(text="Hello Bob! *waves*"))
        wait_turn_done(page, send(page, "/greet say hi to Bob"))
        sent = fake.chat_requests()[-1]["body"]["messages"][-1]["content"]
        sent = sent if isinstance(sent, str) else " ".join(part.get("text", "") for part in sent)
        assert "then wave." in sent and "say hi to Bob" in sent
        user = page.locator(".msg-user").last
        expect(user.locator(".skill-line")).to_have_text("⚡ Skill: greet")
        expect(user.locator(".skill-instruction")).to_have_text("say hi to Bob")
        # The quick title, then the model's (the fake titles "About <the person's words>").
        expect(page.locator("#chat-title")).to_have_text(re.compile(r"^(About )?/greet say hi to"))
        expect(page.locator(".msg-assistant .msg-usage").last).to_have_text(re.compile(r"^↑[\d.]+k? ↓\d+$"))
        screenshots(page, "skill-command")

        page.locator("#composer-input").fill("/usage")
        page.locator("#composer-input").press("Enter")
        report = page.locator(".modal")
        expect(report).to_contain_text("over 1 answer.")
        expect(report.locator(".usage-table tr")).to_have_count(2)
        screenshots(page, "usage")


def test_the_mcp_tab_shows_each_servers_state_and_tools(browser, toolbox_server):
    with open_page(browser, toolbox_server.base_url) as page:
        new_session(page)
        dialog = _open(page, "MCP servers")
        demo = dialog.locator(".toolbox-server", has_text="demo")
        expect(demo.locator(".toolset-mcp")).to_have_text(re.compile(r"^connected · \d+ tools$"))
        expect(demo.locator(".toolbox-tools")).to_contain_text("mcp__demo__add")
        stuck = dialog.locator(".toolbox-server", has_text="stuck")
        expect(stuck).to_contain_text("did not answer within 4 s")
        screenshots(page, "toolbox-mcp")


def test_an_unknown_command_is_not_sent_unless_the_person_says_so(browser, toolbox_server, fake):
    with open_page(browser, toolbox_server.base_url) as page:
        new_session(page)
        asked_before = len(fake.chat_requests())
        page.locator("#composer-input").fill("/etc is where the config lives")
        page.locator("#composer-input").press("Enter")
        status = page.locator("#composer-status")
        expect(status).to_contain_text("/etc is not a command")
        screenshots(page, "unknown-command")
        assert len(fake.chat_requests()) == asked_before
        fake.script(Reply(text="Yes, /etc."))
        before = page.locator("#transcript").get_attribute("data-turns-done") or "0"
        status.get_by_role("button", name="Send as text").click()
        wait_turn_done(page, int(before))
        expect(page.locator(".msg-user").last).to_contain_text("/etc is where the config lives")

        page.locator("#composer-input").fill("/help")
        page.locator("#composer-input").press("Enter")
        expect(page.locator(".modal")).to_contain_text("/greet")
        expect(page.locator(".modal")).to_contain_text("/compress")
        screenshots(page, "help-commands")


def test_settings_are_changed_in_the_page_with_the_command_lines_bounds(browser, toolbox_server):
    config = toolbox_server.hermes_home / "config.yaml"
    with open_page(browser, toolbox_server.base_url) as page:
        page.guard.allowed_statuses.add(400)
        new_session(page)
        dialog = _open(page, "Settings")
        locked = dialog.locator("#setting-agent_toolsets")
        expect(locked).to_be_disabled()  # the test server sets TALARIA_AGENT_TOOLSETS
        expect(
            dialog.locator(".toolbox-setting", has=page.locator("#setting-agent_toolsets"))
        ).to_contain_text("Set by TALARIA_AGENT_TOOLSETS")
        timeout = dialog.locator("#setting-approval_timeout")
        timeout.fill("0")
        dialog.get_by_role("button", name="Save settings").click()
        expect(dialog.locator(".form-error")).to_contain_text("approval_timeout: must be between 1 and 86400")
        screenshots(page, "toolbox-settings-refused")
        timeout.fill("90")
        dialog.get_by_role("button", name="Save settings").click()
        expect(page.locator(".toast").last).to_contain_text("Settings saved.")
        assert yaml.safe_load(config.read_text())["webui"]["approval_timeout"] == 90
        expect(dialog.locator("#setting-approval_timeout")).to_have_value("90")
        screenshots(page, "toolbox-settings")


def test_a_turn_in_which_the_agent_changed_its_memory_says_so_in_the_transcript(
    browser, toolbox_server, fake
):
    entry = "The person prefers short answers."
    with open_page(browser, toolbox_server.base_url) as page:
        new_session(page)
        args = {"action": "add", "target": "user", "content": entry}
        fake.script(Reply(tool_calls=[{"name": "memory", "arguments": args}]), Reply(text="Noted."))
        wait_turn_done(page, send(page, "keep it short from now on"))
        card = page.locator(".tool-card").last
        card.locator("summary").first.click()
        expect(card.locator(".memory-note")).to_have_text("Memory changed: added to USER.md")
        expect(card.locator(".memory-entry")).to_have_text(entry)
        screenshots(page, "memory-changed-in-turn")
    assert entry in (toolbox_server.hermes_home / "memories" / "USER.md").read_text(encoding="utf-8")

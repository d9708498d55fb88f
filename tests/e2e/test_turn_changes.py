"""A turn's changes in a real browser: listed under the answer that ended the turn ("2 files changed"), a
file's diff unified and side by side, the restore of the whole turn and its undo, the same list in the
files panel, and the panel following the agent live (a file it writes appears while the turn still runs,
marked until viewed). The real server and agent; the fake LLM."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from talaria_testing.fake_llm import Reply, file_agent_server

from .helpers import (
    PHONE,
    new_session,
    open_page,
    restore_turn,
    screenshots,
    send,
    undo_restore,
    wait_turn_done,
)

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def changes_server(tmp_path_factory, llm):
    root = tmp_path_factory.mktemp("turn-changes-e2e")
    with file_agent_server(root, llm.base_url) as server:
        (server.workspace / "README.md").write_text("# Project\n")
        yield server


def _call(name: str, **arguments) -> dict:
    return {"name": name, "arguments": arguments}


def test_a_turns_files_show_under_its_answer_with_a_side_by_side_diff_and_a_restore_that_can_be_undone(
    browser, changes_server, llm
):
    notes = changes_server.workspace / "notes.txt"
    notes.write_text("alpha\nbeta\ngamma\n")
    fresh = changes_server.workspace / "fresh.txt"
    with open_page(browser, changes_server.base_url) as page:
        new_session(page)
        llm.script(
            Reply(
                tool_calls=[
                    _call("patch", path="notes.txt", old_string="beta", new_string="BETA\ndelta"),
                    _call("write_file", path="fresh.txt", content="new file\n"),
                ]
            ),
            Reply(text="I edited the notes and added a file."),
        )
        wait_turn_done(page, send(page, "edit the notes"))
        changes = page.locator(".msg-assistant .turn-changes").last
        expect(changes.locator(".turn-changes-label")).to_have_text("2 files changed")
        changes.locator("summary").click()
        expect(changes.locator(".turn-file")).to_have_count(2)
        expect(changes.locator(".turn-file-added")).to_contain_text("fresh.txt")
        changes.locator(".turn-file", has_text="notes.txt").locator("button").click()
        expect(changes.locator(".diff-unified .diff-del")).to_contain_text("-beta")
        changes.get_by_role("button", name="Side by side").click()
        table = changes.locator(".diff-split-table")
        expect(table.locator(".diff-text.diff-del")).to_have_text(["beta"])
        expect(table.locator(".diff-text.diff-add")).to_have_text(["BETA", "delta"])
        expect(table.locator("tr", has_text="BETA").locator(".diff-num").first).to_have_text("2")
        changes.scroll_into_view_if_needed()
        screenshots(page, "turn-changes-split")

        toast = restore_turn(page, changes)
        assert notes.read_text() == "alpha\nbeta\ngamma\n" and not fresh.exists()
        screenshots(page, "turn-changes-restored")
        undo_restore(page, toast)
        assert notes.read_text() == "alpha\nBETA\ndelta\ngamma\n" and fresh.read_text() == "new file\n"

        page.locator("#files-toggle").click()
        panel = page.locator("#files-panel")
        panel.get_by_role("button", name="Changes").click()
        item = panel.locator(".turn-list-item").first
        expect(item.locator(".turn-list-words")).to_have_text("edit the notes")
        expect(item.locator(".turn-changes-label")).to_have_text("2 files changed")
        screenshots(page, "turn-changes-panel")


def test_the_panel_shows_a_file_the_agent_writes_while_the_turn_runs_marked_until_viewed(
    browser, changes_server, llm
):
    with open_page(browser, changes_server.base_url) as page:
        new_session(page)
        page.locator("#files-toggle").click()
        panel = page.locator("#files-panel")
        expect(panel.locator(".files-row", has_text="README.md")).to_be_visible()
        llm.script(
            Reply(tool_calls=[_call("write_file", path="live/draft.txt", content="on its way\n")]),
            Reply(text="Written.", hang_after=0),  # the turn waits here until released
        )
        before = send(page, "write a draft")
        row = panel.locator(".files-row", has_text="draft.txt")
        expect(row).to_have_class("files-row files-file files-changed")
        expect(panel.locator(".files-row.files-changed", has_text="live")).to_be_visible()
        expect(page.locator("#stop")).to_be_visible()  # the turn is still running
        screenshots(page, "files-live-mark")
        llm.release()
        wait_turn_done(page, before)
        row.click()
        expect(panel.locator(".files-code")).to_contain_text("on its way")
        expect(panel.locator(".files-row.files-changed")).to_have_count(0)


def test_on_a_phone_the_side_by_side_diff_scrolls_sideways_inside_its_box(browser, changes_server, llm):
    (changes_server.workspace / "wide.txt").write_text("short\n")
    with open_page(browser, changes_server.base_url) as page:
        new_session(page)
        page.set_viewport_size(PHONE)
        llm.script(
            Reply(tool_calls=[_call("write_file", path="wide.txt", content="long " * 40 + "\n")]),
            Reply(text="Widened."),
        )
        wait_turn_done(page, send(page, "widen it"))
        changes = page.locator(".msg-assistant .turn-changes").last
        changes.locator("summary").click()
        changes.locator(".turn-file", has_text="wide.txt").locator("button").click()
        changes.get_by_role("button", name="Side by side").click()
        split = changes.locator(".diff-split")
        expect(split).to_be_visible()
        widths = split.evaluate(
            "(box) => [box.scrollWidth, box.clientWidth, document.documentElement.scrollWidth]"
        )
        assert widths[0] > widths[1]  # the table scrolls inside its box…
        assert widths[2] <= PHONE["width"]  # …and the page itself does not


def test_a_long_diff_is_shown_cut_with_a_note_of_where(browser, changes_server, llm):
    (changes_server.workspace / "long.txt").write_text("")
    body = "".join(f"line {i}\n" for i in range(4_000))
    with open_page(browser, changes_server.base_url) as page:
        new_session(page)
        llm.script(
            Reply(tool_calls=[_call("write_file", path="long.txt", content=body)]), Reply(text="Long.")
        )
        wait_turn_done(page, send(page, "make it long"))
        changes = page.locator(".msg-assistant .turn-changes").last
        changes.locator("summary").click()
        changes.locator(".turn-file", has_text="long.txt").locator("button").click()
        expect(changes.locator(".diff-cut")).to_have_text("The diff is cut at 3,000 lines of 4,005.")
        expect(changes.locator(".diff-unified .diff-add").last).to_have_text("+line 2994")
        changes.locator(".diff-cut").scroll_into_view_if_needed()
        screenshots(page, "turn-changes-cut")

"""The files panel in a real browser: the workspace beside the chat (a drawer on phones), a preview of each
kind, an edit whose save meets a change the agent made meanwhile, a delete into the trash and back, and
a file the agent writes in a turn appearing when the turn ends. The real server and agent; the fake LLM."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from talaria_testing.fake_llm import FakeLLM, Reply, file_agent_server

from .helpers import new_session, open_files_panel, open_page, screenshots, send, wait_turn_done

pytestmark = pytest.mark.e2e

PNG = (
    b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x02\x00\x00\x00\x90wS\xde"
    b"\x00\x00\x00\x0cIDATx\x9cc\xf8\xcf\xc0\x00\x00\x03\x01\x01\x00\xc9\xfe\x92\xef\x00\x00\x00\x00IEND\xaeB`\x82"
)


@pytest.fixture(scope="module")
def fake():
    with FakeLLM() as server:
        yield server


@pytest.fixture(scope="module")
def files_server(tmp_path_factory, fake):
    root = tmp_path_factory.mktemp("files-e2e")
    with file_agent_server(root, fake.base_url, env={"TALARIA_CHECKPOINT_INTERVAL": "0.5"}) as server:
        workspace = server.workspace
        (workspace / "src").mkdir()
        (workspace / "src" / "main.py").write_text("def answer():\n    return 42\n")
        (workspace / "README.md").write_text("# Project\n\nA **small** project.\n")
        (workspace / "people.csv").write_text("name,age\nAda,36\nLin,29\n")
        (workspace / "logo.png").write_bytes(PNG)
        (workspace / "data.bin").write_bytes(bytes(range(256)) * 4)
        (workspace / ".env").write_text("SECRET=1\n")
        yield server


def test_the_workspace_is_beside_the_chat_with_a_preview_of_each_kind(browser, files_server):
    with open_page(browser, files_server.base_url) as page:
        new_session(page)
        panel = open_files_panel(page)
        rows = panel.locator(".files-row .files-name")
        expect(rows).to_have_text(["src", "data.bin", "logo.png", "people.csv", "README.md"])
        panel.locator(".files-hidden input").check()
        expect(panel.locator(".files-row", has_text=".env")).to_be_visible()
        panel.locator(".files-hidden input").uncheck()

        panel.locator(".files-row", has_text="src").click()
        panel.locator(".files-row", has_text="main.py").click()
        expect(panel.locator(".files-code .k").first).to_have_text("def")
        screenshots(page, "files-code")
        panel.locator(".files-row", has_text="README.md").click()
        expect(panel.locator(".files-markdown strong")).to_have_text("small")
        screenshots(page, "files-markdown")
        panel.locator(".files-row", has_text="people.csv").click()
        expect(panel.locator(".files-csv tr")).to_have_count(3)
        screenshots(page, "files-csv")
        panel.locator(".files-row", has_text="logo.png").click()
        expect(panel.locator(".files-view-image img")).to_have_js_property("naturalWidth", 1)
        screenshots(page, "files-image")
        panel.locator(".files-row", has_text="data.bin").click()
        expect(panel.locator(".files-view-binary")).to_contain_text("A binary file")


def test_an_edit_meets_the_agents_change_and_a_delete_goes_to_the_trash_and_back(browser, files_server):
    main = files_server.workspace / "src" / "main.py"
    with open_page(browser, files_server.base_url) as page:
        page.guard.allowed_statuses.add(409)
        new_session(page)
        panel = open_files_panel(page)
        panel.locator(".files-row", has_text="src").click()
        panel.locator(".files-row", has_text="main.py").click()
        panel.get_by_role("button", name="Edit").click()
        editor = panel.locator(".files-editor")
        editor.fill("def answer():\n    return 43\n")
        main.write_text("def answer():\n    return 'the agent'\n")
        panel.get_by_role("button", name="Save").click()
        expect(panel.locator(".toolbox-conflict")).to_contain_text("return 'the agent'")
        screenshots(page, "files-edit-conflict")
        panel.get_by_role("button", name="Keep mine (replace theirs)").click()
        expect(page.locator(".toast").last).to_contain_text("Saved main.py")
        assert main.read_text() == "def answer():\n    return 43\n"

        panel.get_by_role("button", name="Delete").click()
        page.locator(".modal").get_by_role("button", name="Delete").click()
        expect(page.locator(".toast").last).to_contain_text("is in the trash")
        assert not main.exists()
        panel.get_by_role("button", name="Trash").click()
        expect(panel.locator(".files-trash-row")).to_contain_text("src/main.py")
        screenshots(page, "files-trash")
        panel.locator(".files-trash-row").get_by_role("button", name="Restore").click()
        expect(page.locator(".toast").last).to_contain_text("is back")
        assert main.read_text() == "def answer():\n    return 43\n"


def test_a_file_the_agent_writes_in_a_turn_appears_when_the_turn_ends(browser, files_server, fake):
    with open_page(browser, files_server.base_url) as page:
        new_session(page)
        panel = open_files_panel(page)
        expect(panel.locator(".files-row", has_text="README.md")).to_be_visible()
        args = {"path": "notes/todo.txt", "content": "write the panel\n"}
        fake.script(Reply(tool_calls=[{"name": "write_file", "arguments": args}]), Reply(text="Written."))
        wait_turn_done(page, send(page, "write a todo file"))
        expect(panel.locator(".files-row", has_text="notes")).to_be_visible()
        assert (files_server.workspace / "notes" / "todo.txt").read_text() == "write the panel\n"


def test_the_changes_of_the_agents_turns_are_diffed_restored_and_the_restore_undone(
    browser, files_server, fake
):
    plan = files_server.workspace / "plan.txt"
    with open_page(browser, files_server.base_url) as page:
        new_session(page)
        panel = open_files_panel(page)
        for content in ("step one\n", "step two\n"):
            args = {"path": "plan.txt", "content": content}
            fake.script(Reply(tool_calls=[{"name": "write_file", "arguments": args}]), Reply(text="Done."))
            wait_turn_done(page, send(page, f"write {content.strip()}"))
        panel.get_by_role("button", name="Changes").click()
        newest = panel.locator(".files-change").first
        expect(newest).to_contain_text("before write_file")
        newest.get_by_role("button", name="Diff to now").click()
        expect(panel.locator(".diff-unified .diff-del")).to_contain_text("-step one")
        expect(panel.locator(".diff-unified .diff-add")).to_contain_text("+step two")
        screenshots(page, "files-diff")
        panel.get_by_role("button", name="← Changes").click()
        panel.locator(".files-change").first.get_by_role("button", name="Restore").click()
        page.locator(".modal").get_by_role("button", name="Restore").click()
        toast = page.locator(".toast", has_text="The workspace is restored.")
        expect(toast).to_be_visible()
        assert plan.read_text() == "step one\n"
        screenshots(page, "files-restored")
        toast.get_by_role("button", name="Undo").click()
        expect(page.locator(".toast").last).to_contain_text("The restore is undone.")
        assert plan.read_text() == "step two\n"


def test_opening_a_folder_lists_that_folder_alone_and_closing_it_takes_its_rows_out(browser, files_server):
    """Each open or close re-listed the whole tree (the root and every open folder) and drew every row again:
    opening a folder of 10,000 entries froze the page for half a second. Now opening asks for that folder
    alone and puts its rows under it; closing asks for nothing."""
    nested = files_server.workspace / "nest" / "inner"
    nested.mkdir(parents=True, exist_ok=True)
    (nested / "deep.txt").write_text("deep\n")
    (files_server.workspace / "nest" / "top.txt").write_text("top\n")
    with open_page(browser, files_server.base_url) as page:
        new_session(page)
        panel = open_files_panel(page)
        expect(panel.locator(".files-row", has_text="nest")).to_be_visible()
        listed: list[str] = []
        page.on("request", lambda request: "/api/list" in request.url and listed.append(request.url))
        panel.locator(".files-row", has_text="nest").click()
        expect(panel.locator(".files-row", has_text="inner")).to_be_visible()
        panel.locator(".files-row", has_text="inner").click()
        expect(panel.locator(".files-row", has_text="deep.txt")).to_be_visible()
        assert [url.split("path=")[1].split("&")[0] for url in listed] == ["nest", "nest%2Finner"]
        names = panel.locator(".files-row .files-name")
        expect(names).to_contain_text(["nest", "inner", "deep.txt", "top.txt", "src"])
        expect(panel.locator(".files-row", has_text="nest").locator(".files-mark")).to_have_text("▾")
        panel.locator(".files-row", has_text="nest").click()
        expect(panel.locator(".files-row", has_text="deep.txt")).to_have_count(0)
        expect(panel.locator(".files-row", has_text="top.txt")).to_have_count(0)
        expect(panel.locator(".files-row", has_text="nest").locator(".files-mark")).to_have_text("▸")
        assert len(listed) == 2
        panel.locator(".files-row", has_text="nest").click()  # open again: its open subfolder comes back open
        expect(panel.locator(".files-row", has_text="deep.txt")).to_be_visible()

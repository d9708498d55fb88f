"""Files in and out of the workspace in a real browser: a folder's zip downloaded from its row, files
uploaded by the panel's button into the folder last opened, and files dropped on a folder or on the tree;
an upload whose name is taken asks, and never replaces the file. The real server (its agent set up for the
fake LLM, so the page opens without the first-run dialog); no turn is run."""

from __future__ import annotations

import io
import re
import zipfile
from pathlib import Path

import pytest
from playwright.sync_api import expect

from talaria_testing.fake_llm import agent_server

from .helpers import new_session, open_files_panel, open_page, screenshots

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def transfer_server(tmp_path_factory, llm):
    root = tmp_path_factory.mktemp("transfer-e2e")
    with agent_server(root, llm.base_url, env={"TALARIA_WORKSPACE_ROOTS": str(root)}) as server:
        workspace = server.workspace
        (workspace / "docs" / "notes").mkdir(parents=True)
        (workspace / "docs" / "guide.md").write_text("# Guide\n")
        (workspace / "docs" / "notes" / "monday.txt").write_text("monday\n")
        (workspace / "src").mkdir()
        (workspace / "src" / "main.py").write_text("print('hi')\n")
        yield server


def _dragged(page, files: dict[str, str]):
    """What a drag from the desktop carries: a DataTransfer of Files (name → text)."""
    return page.evaluate_handle(
        """(files) => {
            const transfer = new DataTransfer();
            for (const [name, text] of Object.entries(files)) transfer.items.add(new File([text], name));
            return transfer;
        }""",
        files,
    )


def _drop(page, target, files: dict[str, str]) -> None:
    transfer = _dragged(page, files)
    target.dispatch_event("dragover", {"dataTransfer": transfer})
    target.dispatch_event("drop", {"dataTransfer": transfer})


def test_a_folder_downloads_as_a_zip_from_its_row(browser, transfer_server):
    with open_page(browser, transfer_server.base_url) as page:
        new_session(page)
        panel = open_files_panel(page)
        docs = panel.locator(".files-item", has=page.locator(".files-row", has_text="docs"))
        docs.hover()
        link = docs.get_by_role("link", name="Download docs as a zip")
        expect(link).to_be_visible()
        screenshots(page, "files-folder-download")
        with page.expect_download() as caught:
            link.click()
        download = caught.value
        assert download.suggested_filename == "docs.zip"
        archive = zipfile.ZipFile(io.BytesIO(Path(download.path()).read_bytes()))
        assert sorted(archive.namelist()) == [
            "docs/",
            "docs/guide.md",
            "docs/notes/",
            "docs/notes/monday.txt",
        ]
        assert archive.read("docs/notes/monday.txt") == b"monday\n"


def test_files_uploaded_by_the_button_land_in_the_folder_last_opened(browser, transfer_server):
    workspace = transfer_server.workspace
    with open_page(browser, transfer_server.base_url) as page:
        page.guard.allowed_statuses.add(409)
        new_session(page)
        panel = open_files_panel(page)
        panel.locator(".files-row", has_text="src").click()
        upload = panel.get_by_role("button", name="Upload")
        expect(upload).to_have_attribute("title", "Upload files into src (or drop them on a folder)")
        panel.locator(".files-upload-input").set_input_files(
            [
                {"name": "plan.txt", "mimeType": "text/plain", "buffer": b"the plan\n"},
                {"name": "logo.bin", "mimeType": "application/octet-stream", "buffer": bytes(range(256))},
            ]
        )
        expect(page.locator(".toast").last).to_contain_text("2 files uploaded to src")
        assert (workspace / "src" / "plan.txt").read_bytes() == b"the plan\n"
        assert (workspace / "src" / "logo.bin").read_bytes() == bytes(range(256))
        expect(panel.locator(".files-row.selected")).to_contain_text("logo.bin")

        panel.locator(".files-upload-input").set_input_files(
            {"name": "plan.txt", "mimeType": "text/plain", "buffer": b"another plan\n"}
        )
        modal = page.locator(".modal")
        expect(modal).to_contain_text("src already holds a file named plan.txt")
        screenshots(page, "files-upload-exists")
        modal.get_by_role("button", name="Keep both").click()
        expect(page.locator(".toast").last).to_contain_text("src/plan-1.txt uploaded to src")
        assert (workspace / "src" / "plan.txt").read_bytes() == b"the plan\n"
        assert (workspace / "src" / "plan-1.txt").read_bytes() == b"another plan\n"

        panel.locator(".files-upload-input").set_input_files(
            {"name": "plan.txt", "mimeType": "text/plain", "buffer": b"a third plan\n"}
        )
        page.locator(".modal").get_by_role("button", name="Skip").click()
        expect(page.locator(".modal")).to_have_count(0)
        assert sorted(p.name for p in (workspace / "src").iterdir()) == [
            "logo.bin",
            "main.py",
            "plan-1.txt",
            "plan.txt",
        ]


def test_files_dropped_on_a_folder_or_on_the_tree_are_uploaded_there(browser, transfer_server):
    workspace = transfer_server.workspace
    with open_page(browser, transfer_server.base_url) as page:
        new_session(page)
        panel = open_files_panel(page)
        panel.locator(".files-row", has_text="docs").click()
        notes = panel.locator(".files-row", has_text="notes")
        expect(notes).to_be_visible()
        notes.dispatch_event("dragover", {"dataTransfer": _dragged(page, {"tuesday.txt": "tuesday\n"})})
        expect(panel.locator(".files-tree")).to_have_class("files-tree drop-target")
        expect(notes).to_have_class(re.compile(r"\bdrop-folder\b"))  # where the drop will land
        screenshots(page, "files-drop-target")
        _drop(page, notes, {"tuesday.txt": "tuesday\n"})
        expect(page.locator(".toast").last).to_contain_text("docs/notes/tuesday.txt uploaded to docs/notes")
        assert (workspace / "docs" / "notes" / "tuesday.txt").read_text() == "tuesday\n"
        expect(panel.locator(".files-row.selected")).to_contain_text("tuesday.txt")

        guide = panel.locator(".files-row", has_text="guide.md")
        _drop(page, guide, {"faq.md": "# FAQ\n"})  # on a file: into the file's folder
        expect(page.locator(".toast").last).to_contain_text("docs/faq.md uploaded to docs")
        assert (workspace / "docs" / "faq.md").read_text() == "# FAQ\n"

        tree = panel.locator(".files-tree")
        _drop(page, tree, {"top.txt": "top\n", "second.txt": "second\n"})
        expect(page.locator(".toast").last).to_contain_text("2 files uploaded to the workspace")
        expect(tree).not_to_have_class("files-tree drop-target")
        assert (workspace / "top.txt").read_text() == "top\n"
        assert (workspace / "second.txt").read_text() == "second\n"
        assert not (workspace / "uploads").exists()  # a drop on the panel is not a chat attachment

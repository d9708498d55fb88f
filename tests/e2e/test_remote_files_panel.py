"""The files panel of a session in an SSH environment, in a real browser: the tree and previews are those of
the folder on a real OpenSSH server; an edit, an upload and a deletion into the trash and back are made there (a
note says where the files are), and "Changes" shows each turn's changes and git's status and diff of the work
tree there; a turn's changes show under its answer, read from the checkpoints kept there, and its restore and
undo act there."""

from __future__ import annotations

import io
import os
import subprocess
import zipfile
from pathlib import Path

import pytest
from playwright.sync_api import expect

from talaria_testing import sshd
from talaria_testing.fake_llm import Reply, agent_server

from .helpers import goto_app, open_files_panel, restore_turn, screenshots, send, undo_restore, wait_turn_done
from .test_conversation import png

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(bool(sshd.available()), reason=sshd.available() or "ok")]


@pytest.fixture
def ssh(tmp_path):
    with sshd.SshServer(tmp_path / "sshd") as server:
        yield server


@pytest.fixture
def server(tmp_path, llm, ssh):
    env = {
        "TALARIA_WORKSPACE_ROOTS": str(tmp_path),
        "PATH": f"{ssh.client_path}{os.pathsep}{os.environ['PATH']}",
    }
    with agent_server(tmp_path / "srv", llm.base_url, toolsets="file", env=env) as srv:
        srv.post_json("/api/environments", ssh.definition("buildbox"))
        srv.post_json("/api/environments/confirm", {"name": "buildbox"})
        yield srv


def _git(folder, *args: str) -> None:
    command = ["git", "-C", str(folder), "-c", "user.name=t", "-c", "user.email=t@t", *args]
    subprocess.run(command, check=True, capture_output=True)


def test_a_remote_sessions_files_and_changes_are_read_on_its_host_and_an_edit_is_saved_there(
    page, server, ssh
):
    project = ssh.remote_home / "project"
    (project / "src").mkdir(parents=True)
    (project / "src" / "main.py").write_text("def answer():\n    return 42\n")
    (project / "README.md").write_text("# On the build box\n\nBuilt **there**.\n")
    _git(project, "init", "-q", "-b", "main")
    _git(project, "add", "-A")
    _git(project, "commit", "-q", "-m", "first")
    (project / "src" / "main.py").write_text("def answer():\n    return 43\n")
    (project / "notes.txt").write_text("new over there\n")
    sid = server.post_json("/api/session/new", {})["session"]["session_id"]
    server.post_json("/api/session/environment", {"session_id": sid, "environment": "buildbox"})
    server.post_json("/api/session/workspace", {"session_id": sid, "workspace": "~/project"})

    goto_app(page, f"/#/s/{sid}")
    panel = open_files_panel(page)
    expect(panel.locator(".files-remote-note")).to_have_text(
        "Files on buildbox: what you create, upload, rename, edit or delete here changes them there."
    )
    expect(panel.locator(".files-row", has_text="README.md")).to_be_visible(timeout=30000)
    for tool in ("New file", "New folder", "Upload", "Trash"):
        expect(panel.get_by_role("button", name=tool, exact=True)).to_be_visible()
    panel.locator(".files-row", has_text="src").click()
    panel.locator(".files-row", has_text="main.py").click()
    expect(panel.locator(".files-preview")).to_contain_text("return 43")
    expect(panel.locator(".files-file-tools").get_by_role("link", name="Download")).to_be_visible()
    for tool in ("Rename", "Delete"):
        expect(panel.locator(".files-file-tools").get_by_role("button", name=tool)).to_be_visible()
    screenshots(page, "remote-files-preview")

    # ⤓ on a folder downloads it as a zip of its files there.
    with page.expect_download() as caught:
        panel.get_by_role("link", name="Download src as a zip").click()
    download = caught.value
    assert download.suggested_filename == "src.zip"
    with zipfile.ZipFile(io.BytesIO(Path(download.path()).read_bytes())) as archive:
        assert sorted(archive.namelist()) == ["src/", "src/main.py"]
        assert archive.read("src/main.py") == b"def answer():\n    return 43\n"

    # An upload lands in the folder last opened there; a taken name asks and never replaces the file.
    panel.locator(".files-upload-input").set_input_files(
        {"name": "plan.txt", "mimeType": "text/plain", "buffer": b"the plan\n"}
    )
    expect(page.locator(".toast").last).to_contain_text("plan.txt uploaded to src")
    assert (project / "src" / "plan.txt").read_bytes() == b"the plan\n"
    page.guard.allowed_statuses.add(409)  # the taken name's answer, which the page asks about
    panel.locator(".files-upload-input").set_input_files(
        {"name": "plan.txt", "mimeType": "text/plain", "buffer": b"another plan\n"}
    )
    page.locator(".modal").get_by_role("button", name="Keep both").click()
    expect(page.locator(".toast").last).to_contain_text("src/plan-1.txt uploaded to src")
    assert (project / "src" / "plan.txt").read_bytes() == b"the plan\n"
    assert (project / "src" / "plan-1.txt").read_bytes() == b"another plan\n"

    # A deletion goes to the trash kept on that host, and comes back from it.
    expect(panel.locator(".files-file-name")).to_have_text("src/plan-1.txt")  # the upload shows it
    panel.locator(".files-file-tools").get_by_role("button", name="Delete").click()
    page.locator(".modal").get_by_role("button", name="Delete").click()
    expect(page.locator(".toast").last).to_contain_text("is in the trash")
    assert not (project / "src" / "plan-1.txt").exists()
    panel.get_by_role("button", name="Trash", exact=True).click()
    expect(panel.locator(".files-trash-row")).to_contain_text("src/plan-1.txt")
    screenshots(page, "remote-files-trash")
    panel.locator(".files-trash-row").get_by_role("button", name="Restore").click()
    expect(page.locator(".toast").last).to_contain_text("is back")
    assert (project / "src" / "plan-1.txt").read_bytes() == b"another plan\n"
    panel.locator(".files-row", has_text="main.py").click()
    expect(panel.locator(".files-preview")).to_contain_text("return 43")

    panel.get_by_role("button", name="Edit").click()
    panel.locator(".files-editor").fill("def answer():\n    return 44\n")
    panel.get_by_role("button", name="Save").click()
    expect(page.locator(".toast").last).to_contain_text("Saved main.py")
    assert (project / "src" / "main.py").read_text() == "def answer():\n    return 44\n"

    panel.get_by_role("button", name="Changes", exact=True).click()
    changes = panel.locator(".files-changes")
    expect(changes).to_contain_text("Uncommitted on buildbox (branch main)")
    expect(changes.locator(".files-change", has_text="src/main.py")).to_contain_text("modified")
    expect(changes.locator(".files-change", has_text="notes.txt")).to_contain_text("new")
    screenshots(page, "remote-files-changes")
    changes.locator(".files-change", has_text="src/main.py").get_by_role("button", name="Diff").click()
    expect(panel.locator(".files-diff")).to_contain_text("return 44")
    screenshots(page, "remote-files-diff")


def test_attachments_of_a_remote_session_are_kept_on_its_host_and_its_images_shown_from_there(
    page, server, ssh, llm
):
    project = ssh.remote_home / "shots"
    project.mkdir()
    sid = server.post_json("/api/session/new", {})["session"]["session_id"]
    server.post_json("/api/session/environment", {"session_id": sid, "environment": "buildbox"})
    server.post_json("/api/session/workspace", {"session_id": sid, "workspace": "~/shots"})
    goto_app(page, f"/#/s/{sid}")
    page.locator(".composer input[type=file]").set_input_files(
        [
            {"name": "pixel.png", "mimeType": "image/png", "buffer": png(96, 64)},
            {"name": "data.csv", "mimeType": "text/csv", "buffer": b"a,b\n1,2\n"},
        ]
    )
    expect(page.locator(".attach-tray .attach-chip:not(.pending)")).to_have_text(["pixel.png×", "data.csv×"])
    assert (project / "uploads" / "pixel.png").read_bytes() == png(96, 64)
    assert not (server.root / "uploads").exists()
    llm.script(Reply(text="A teal pixel and a table."))
    wait_turn_done(page, send(page, "Look at these"))
    user = page.locator(".msg-user").last
    image = user.locator("img.attach-image")
    expect(image).to_be_visible()
    page.wait_for_function("img => img.complete && img.naturalWidth === 96", arg=image.element_handle())
    expect(user.locator(".attach-file")).to_have_text(["data.csv"])
    expect(page.locator(".msg-assistant .msg-body").last).to_have_text("A teal pixel and a table.")
    expect(page.locator("#chat-title")).to_contain_text("Look at these")
    expect(page.locator("#chat-title")).not_to_contain_text("Attached")  # the title is what the person wrote
    screenshots(page, "remote-attachments-sent")


def test_a_remote_turns_changes_show_under_its_answer_and_its_restore_and_undo_act_on_the_host(
    page, server, ssh, llm
):
    project = ssh.remote_home / "proj"
    project.mkdir()
    notes = project / "notes.txt"
    notes.write_text("alpha\nbeta\ngamma\n")
    _git(project, "init", "-q", "-b", "main")
    _git(project, "add", "-A")
    _git(project, "commit", "-q", "-m", "first")
    fresh = project / "fresh.txt"
    sid = server.post_json("/api/session/new", {})["session"]["session_id"]
    server.post_json("/api/session/environment", {"session_id": sid, "environment": "buildbox"})
    server.post_json("/api/session/workspace", {"session_id": sid, "workspace": "~/proj"})
    goto_app(page, f"/#/s/{sid}")
    patch = {"name": "patch", "arguments": {"path": "notes.txt", "old_string": "beta", "new_string": "BETA"}}
    write = {"name": "write_file", "arguments": {"path": "fresh.txt", "content": "made there\n"}}
    llm.script(Reply(tool_calls=[patch, write]), Reply(text="I edited the notes on the build box."))
    wait_turn_done(page, send(page, "edit the notes there"))
    assert notes.read_text() == "alpha\nBETA\ngamma\n" and fresh.read_text() == "made there\n"

    changes = page.locator(".msg-assistant .turn-changes").last
    expect(changes.locator(".turn-changes-label")).to_have_text("2 files changed", timeout=30000)
    changes.locator("summary").click()
    expect(changes.locator(".turn-file-added")).to_contain_text("fresh.txt")
    changes.locator(".turn-file", has_text="notes.txt").locator("button").click()
    expect(changes.locator(".diff-unified .diff-del")).to_contain_text("-beta")
    changes.scroll_into_view_if_needed()
    screenshots(page, "remote-turn-changes")

    toast = restore_turn(page, changes)
    assert notes.read_text() == "alpha\nbeta\ngamma\n" and not fresh.exists()
    undo_restore(page, toast)
    assert notes.read_text() == "alpha\nBETA\ngamma\n" and fresh.read_text() == "made there\n"

    panel = open_files_panel(page)
    panel.get_by_role("button", name="Changes").click()
    item = panel.locator(".turn-list-item").first
    expect(item.locator(".turn-list-words")).to_have_text("edit the notes there")
    expect(item.locator(".turn-changes-label")).to_have_text("2 files changed")
    expect(panel.locator(".files-changes")).to_contain_text("Uncommitted on buildbox (branch main)")
    expect(panel.locator(".files-change", has_text="fresh.txt")).to_contain_text("new")
    screenshots(page, "remote-turn-changes-panel")

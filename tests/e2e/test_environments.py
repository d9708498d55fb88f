"""The session's execution environment in a real browser: the picker beside the workspace, an environment
added from the page, "Test connection" against a real OpenSSH server (the confirmation of what the agent
copies comes first, once), a failing test saying what to fix, and the choice saved in the session file."""

from __future__ import annotations

import json
import os
import socket

import pytest
from playwright.sync_api import expect

from talaria_testing import sshd
from talaria_testing.fake_llm import agent_server

from .helpers import goto_app, new_session, open_files_panel, screenshots, send, wait_turn_done

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(bool(sshd.available()), reason=sshd.available() or "ok")]


@pytest.fixture(scope="module")
def ssh(tmp_path_factory):
    with sshd.SshServer(tmp_path_factory.mktemp("e2e-sshd")) as server:
        yield server


@pytest.fixture(scope="module")
def server(tmp_path_factory, llm, ssh):
    root = tmp_path_factory.mktemp("talaria-e2e-environments")
    env = {"TALARIA_WORKSPACE_ROOTS": str(root), "PATH": f"{ssh.client_path}{os.pathsep}{os.environ['PATH']}"}
    with agent_server(root, llm.base_url, toolsets="todo", env=env) as srv:
        yield srv


def _add(page, name: str, fields: dict) -> None:
    picker = page.locator("#environment-picker")
    adder = picker.locator(".environment-add")
    if not adder.evaluate("node => node.open"):
        adder.locator("summary").click()
    picker.get_by_label("Name", exact=True).fill(name)
    picker.get_by_label("Backend").select_option("ssh")
    for label, value in fields.items():
        picker.get_by_label(label, exact=True).fill(str(value))
    picker.get_by_role("button", name="Save").click()
    expect(picker.locator(".environment-name", has_text=name)).to_be_visible()


def test_an_ssh_environment_is_added_confirmed_once_tested_and_chosen_for_the_session(page, server, ssh):
    page.guard.allowed_statuses.add(409)  # the first use of a remote environment asks for the confirmation
    sid = new_session(page)
    picker = page.locator("#environment-picker")
    expect(picker.locator("> summary")).to_have_text("local")
    picker.locator("> summary").click()
    expect(picker.locator(".environment-name", has_text="local")).to_be_visible()
    _add(
        page, "sshbox", {"Host": "127.0.0.1", "User": ssh.user, "Port": ssh.port, "Key file": ssh.client_key}
    )
    screenshots(page, "environment-picker")

    picker.get_by_role("button", name="Test connection to sshbox").click()
    dialog = page.locator("dialog.modal")
    # The first use imports the agent's file-sync modules to list what it copies: seconds on a busy machine.
    expect(dialog).to_contain_text(f"{ssh.user}@127.0.0.1:{ssh.port}", timeout=60000)
    expect(dialog).to_contain_text("copies to ~/.hermes")
    expect(dialog).to_contain_text("skill file")
    screenshots(page, "environment-confirmation")
    dialog.get_by_role("button", name="Copy and use").click()
    row = picker.locator(".environment-row", has_text="sshbox")
    expect(row.locator(".environment-result")).to_contain_text(
        f"✓ {socket.gethostname()} · {ssh.home}", timeout=60000
    )
    screenshots(page, "environment-test-ok")

    _add(
        page,
        "closed",
        {"Host": "127.0.0.1", "User": ssh.user, "Port": sshd.free_port(), "Key file": ssh.client_key},
    )
    picker.get_by_role("button", name="Test connection to closed").click()
    page.locator("dialog.modal").get_by_role("button", name="Copy and use").click()
    failed = picker.locator(".environment-row", has_text="closed").locator(".environment-result")
    expect(failed).to_contain_text("Nothing answered SSH", timeout=30000)
    screenshots(page, "environment-test-failed")

    # Confirmed once: choosing it asks nothing more.
    picker.locator(".environment-option", has_text="sshbox").click()
    expect(picker.locator("> summary")).to_have_text("sshbox")
    assert json.loads((server.session_dir / f"{sid}.json").read_text())["environment"] == "sshbox"
    expect(page.locator("dialog.modal")).to_have_count(0)
    screenshots(page, "environment-chosen")


def test_on_a_phone_the_workspace_menu_opens_the_environment_picker(phone_page, server):
    """The header of a phone keeps two rows: the environment is reached from the workspace menu."""
    sid = server.post_json("/api/session/new", {})["session"]["session_id"]
    goto_app(phone_page, f"/#/s/{sid}")
    expect(phone_page.locator("#workspace-picker > summary")).to_be_visible()
    expect(phone_page.locator("#environment-picker")).to_be_hidden()
    phone_page.locator("#workspace-picker > summary").click()
    phone_page.get_by_role("button", name="Commands run in: local — change").click()
    expect(phone_page.locator("#workspace-picker")).not_to_have_attribute("open", "")
    expect(phone_page.locator("#environment-picker .environment-name", has_text="local")).to_be_visible()
    screenshots(phone_page, "environment-phone-menu")


def test_a_message_to_an_environment_pointed_at_another_host_asks_for_the_confirmation_then_runs_there(
    page, server, ssh, llm
):
    """The confirmation is per target: the host changed since it was given, so the first message asks again."""
    page.guard.allowed_statuses.add(409)  # the refused start that brings the confirmation
    server.post_json("/api/environments", ssh.definition("turnbox"))
    server.post_json("/api/environments/confirm", {"name": "turnbox"})
    sid = server.post_json("/api/session/new", {})["session"]["session_id"]
    server.post_json("/api/session/environment", {"session_id": sid, "environment": "turnbox"})
    server.post_json("/api/environments", {**ssh.definition("turnbox"), "ssh_host": "localhost"})
    goto_app(page, f"/#/s/{sid}")
    llm.script("Answered from the worker of turnbox.")
    before = send(page, "hello over there")
    dialog = page.locator("dialog.modal")
    expect(dialog).to_contain_text(f"{ssh.user}@localhost:{ssh.port}", timeout=60000)
    screenshots(page, "environment-turn-confirmation")
    dialog.get_by_role("button", name="Copy and use").click()
    wait_turn_done(page, before, timeout=60000)
    expect(page.locator("#transcript")).to_contain_text("Answered from the worker of turnbox.")
    saved = json.loads((server.session_dir / f"{sid}.json").read_text())
    assert [m["content"] for m in saved["messages"] if m["role"] == "user"] == ["hello over there"]
    screenshots(page, "environment-turn-answered")

    # Its workspace is the folder on that host, and the files panel shows that host's files.
    expect(page.locator("#workspace-picker > summary")).to_have_text(os.path.basename(ssh.home))
    page.locator("#workspace-picker > summary").click()
    expect(page.locator("#workspace-picker .workspace-path")).to_have_text(f"{ssh.home} (on turnbox)")
    expect(page.locator("#workspace-picker .workspace-recent")).to_have_text("Type a folder on turnbox.")
    screenshots(page, "environment-remote-workspace")
    page.locator("#workspace-picker > summary").click()
    (ssh.remote_home / "on_the_host.txt").write_text("written over there\n")
    panel = open_files_panel(page)
    expect(panel.locator(".files-remote-note")).to_contain_text(
        "Files on turnbox: what you create, upload, rename, edit or delete here changes them there"
    )
    expect(panel.locator(".files-row", has_text="on_the_host.txt")).to_be_visible(timeout=30000)
    screenshots(page, "environment-remote-files")
    # The read keeps the worker's connection there open for the next one; the environment's removal stops
    # its worker, and the connection with it, within this test (the server outlives it).
    server.post_json("/api/environments", {"name": "turnbox", "delete": True})

"""Projects and bulk actions in a real browser: create a project, select three sessions (a click, a
shift-click, the keyboard), move them into it, open its view, delete them all and undo, delete the project
(its sessions stay)."""

from __future__ import annotations

import json
import uuid

import pytest
from playwright.sync_api import expect

from .helpers import goto_app, import_session, screenshot, screenshots

pytestmark = pytest.mark.e2e

CHAT = [
    {"role": "user", "content": "What is the capital of France?"},
    {"role": "assistant", "content": "The capital of France is **Paris**."},
]


def row(page, title: str):
    return page.locator("#session-list .session-row", has_text=title)


def check(page, title: str):
    return row(page, title).locator(".session-check")


def test_create_a_project_move_three_sessions_by_bulk_select_view_it_and_delete_them_with_undo(page, server):
    tag = uuid.uuid4().hex[:6]
    titles = [f"Bulk {tag} {i}" for i in range(4)]  # shown newest first: 3, 2, 1, 0
    sids = {title: import_session(server, title, CHAT)["session_id"] for title in titles}
    name = f"Research {tag}"
    goto_app(page)

    page.get_by_role("button", name="New project").click()
    dialog = page.locator("dialog.modal")
    dialog.locator(".project-name-input").fill(name)
    dialog.get_by_role("radio", name="Green").check()
    screenshots(page, "projects-new")
    dialog.get_by_role("button", name="Create").click()
    project_row = page.locator("#projects .project-row", has_text=name)
    expect(project_row).to_be_visible()
    project = next(p for p in server.get_json("/api/projects")["projects"] if p["name"] == name)
    assert project["color"] == "#30a46c"

    # Select: a click on the newest, a shift-click two rows down, then the keyboard takes one out and back.
    page.locator("#select-sessions").click()
    check(page, titles[3]).click()
    check(page, titles[1]).click(modifiers=["Shift"])
    expect(page.locator(".bulk-count")).to_have_text("3 selected")
    check(page, titles[2]).focus()
    page.keyboard.press("Space")
    expect(page.locator(".bulk-count")).to_have_text("2 selected")
    expect(check(page, titles[2])).to_be_focused()
    page.keyboard.press("Space")
    expect(page.locator(".bulk-count")).to_have_text("3 selected")
    expect(check(page, titles[0])).not_to_be_checked()

    page.locator("#bulk-bar").get_by_role("button", name="Move to…").click()
    page.locator("dialog.modal .project-select").select_option(label=name)
    page.locator("dialog.modal").get_by_role("button", name="Move").click()
    expect(page.locator(".toast", has_text=f"Moved 3 sessions to {name}")).to_be_visible()
    expect(page.locator("#bulk-bar")).to_be_hidden()
    for title in titles[1:]:
        stored = json.loads((server.session_dir / f"{sids[title]}.json").read_text())
        assert stored["project_id"] == project["project_id"]
        expect(row(page, title).locator(".project-dot")).to_be_visible()

    # The project's view: its three sessions only.
    project_row.locator(".project-open").click()
    expect(page.locator("#session-list .session-row")).to_have_count(3)
    expect(row(page, titles[0])).to_have_count(0)
    page.locator("#select-sessions").click()
    check(page, titles[3]).click()
    check(page, titles[1]).click(modifiers=["Shift"])
    screenshots(page, "projects-view-selected")

    page.locator("#bulk-bar").get_by_role("button", name="Delete").click()
    toast = page.locator(".toast", has_text="Deleted 3 sessions")
    expect(toast).to_be_visible()
    expect(page.locator("#session-list .session-row")).to_have_count(0)
    assert not any((server.session_dir / f"{sids[t]}.json").exists() for t in titles[1:])
    screenshot(page, "projects-bulk-delete-undo-desktop-light")
    toast.get_by_role("button", name="Undo").click()
    expect(page.locator("#session-list .session-row")).to_have_count(3)
    assert all((server.session_dir / f"{sids[t]}.json").exists() for t in titles[1:])

    # Deleting the project moves its sessions out; they stay in the list.
    project_row.locator(".session-menu-btn").click()
    project_row.get_by_role("menuitem", name="Delete project").click()
    page.locator("dialog.modal").get_by_role("button", name="Delete project").click()
    expect(page.locator("#projects .project-row", has_text=name)).to_have_count(0)
    expect(page.locator("#projects .project-row.active")).to_have_text("All sessions")
    for title in titles:
        expect(row(page, title)).to_be_visible()
        expect(row(page, title).locator(".project-dot")).to_have_count(0)
    assert all(
        json.loads((server.session_dir / f"{s}.json").read_text())["project_id"] is None
        for s in sids.values()
    )


def test_a_project_is_renamed_and_recoloured_from_its_menu_with_the_keyboard(page, server):
    made = server.post_json("/api/projects/create", {"name": f"Old {uuid.uuid4().hex[:6]}"})["project"]
    goto_app(page)
    project_row = page.locator(f'#projects .project-row[data-project-id="{made["project_id"]}"]')
    project_row.locator(".session-menu-btn").focus()
    page.keyboard.press("Enter")
    expect(project_row.get_by_role("menuitem", name="Rename or recolour")).to_be_focused()
    page.keyboard.press("Enter")
    field = page.locator("dialog.modal .project-name-input")
    expect(field).to_be_focused()
    field.fill("Renamed project")
    page.locator("dialog.modal").get_by_role("radio", name="Purple").check()
    field.press("Enter")
    expect(project_row).to_contain_text("Renamed project")
    stored = next(
        p for p in server.get_json("/api/projects")["projects"] if p["project_id"] == made["project_id"]
    )
    assert stored == {**made, "name": "Renamed project", "color": "#6e56cf"}


def test_the_phone_drawer_holds_the_projects_and_the_bulk_bar_within_390_px(phone_page, server):
    page = phone_page
    tag = uuid.uuid4().hex[:6]
    made = server.post_json("/api/projects/create", {"name": f"Phone {tag}", "color": "#0090ff"})["project"]
    sids = [import_session(server, f"Phone {tag} {i}", CHAT)["session_id"] for i in range(3)]
    server.post_json(
        "/api/sessions/bulk", {"action": "move", "session_ids": sids[:2], "project_id": made["project_id"]}
    )
    goto_app(page)
    page.click("#open-sidebar")
    page.wait_for_function("() => document.getElementById('sidebar').getBoundingClientRect().left >= 0")
    page.locator("#select-sessions").click()
    check(page, f"Phone {tag} 2").click()
    check(page, f"Phone {tag} 0").click(modifiers=["Shift"])
    expect(page.locator(".bulk-count")).to_have_text("3 selected")
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    bar = page.locator("#bulk-bar").bounding_box()
    assert bar and bar["x"] >= 0 and bar["x"] + bar["width"] <= 390
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        screenshot(page, f"projects-drawer-phone-{scheme}")
    page.keyboard.press("Escape")
    expect(page.locator("#bulk-bar")).to_be_hidden()
    expect(page.locator(".session-check")).to_have_count(0)


def test_a_session_dragged_onto_a_project_moves_into_it_and_onto_all_sessions_moves_out(page, server):
    tag = uuid.uuid4().hex[:6]
    made = server.post_json("/api/projects/create", {"name": f"Drop {tag}", "color": "#f76b15"})["project"]
    title = f"Dragged {tag}"
    sid = import_session(server, title, CHAT)["session_id"]
    goto_app(page)
    target = page.locator(f'#projects .project-row[data-project-id="{made["project_id"]}"]')
    row(page, title).drag_to(target)
    expect(page.locator(".toast", has_text=f"Moved 1 session to Drop {tag}")).to_be_visible()
    expect(row(page, title).locator(".project-dot")).to_be_visible()
    assert json.loads((server.session_dir / f"{sid}.json").read_text())["project_id"] == made["project_id"]
    row(page, title).drag_to(page.locator("#projects .project-row", has_text="All sessions"))
    expect(row(page, title).locator(".project-dot")).to_have_count(0)
    assert json.loads((server.session_dir / f"{sid}.json").read_text())["project_id"] is None


def test_a_project_made_elsewhere_shows_when_the_feed_brings_a_session_moved_into_it(page, server):
    title = f"Elsewhere {uuid.uuid4().hex[:6]}"
    sid = import_session(server, title, CHAT)["session_id"]
    goto_app(page)
    page.wait_for_timeout(5200)  # the page reads the projects again at most every five seconds
    made = server.post_json("/api/projects/create", {"name": f"Made elsewhere {sid[:4]}", "color": "#d6409f"})
    server.post_json("/api/session/move", {"session_id": sid, "project_id": made["project"]["project_id"]})
    expect(row(page, title).locator(".project-dot")).to_be_visible()
    expect(page.locator("#projects .project-row", has_text=made["project"]["name"])).to_be_visible()

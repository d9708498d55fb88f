"""The conversation's header: the title keeps its room whatever the header holds, at every width."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from .helpers import goto_app, import_session, qa_history, screenshots

pytestmark = pytest.mark.e2e

TITLE = "Planning the garden irrigation for the summer"
# How many rows the header's visible children wrap to (items of one row share their vertical middle).
HEADER_ROWS = """() => {
  const middles = [...document.querySelector('.chat-head').children]
    .map((n) => n.getBoundingClientRect())
    .filter((r) => r.width > 0)
    .map((r) => r.top + r.height / 2)
    .sort((a, b) => a - b);
  return middles.filter((m, i) => i === 0 || m - middles[i - 1] > 12).length;
}"""

# Whether any two controls of the header (or of its model picker and tools) cover each other.
CONTROLS_OVERLAP = """() => {
  const nodes = [...document.querySelectorAll('.chat-head > *, .agent-controls > *')]
    .filter((n) => !n.classList.contains('agent-controls'))
    .map((n) => n.getBoundingClientRect()).filter((r) => r.width > 0);
  return nodes.some((a, i) => nodes.slice(i + 1).some((b) =>
    a.left < b.right - 1 && b.left < a.right - 1 && a.top < b.bottom - 1 && b.top < a.bottom - 1));
}"""


def test_the_title_keeps_its_room_while_the_not_asking_notice_shows(page, server):
    """With "Not asking before commands" on, the title had no width left at 1024 and 1280 px (it
    vanished), and at 390 px the header wrapped to three rows with the title cut."""
    sid = import_session(
        server, TITLE, qa_history(1, answer_repeat=1), last_prompt_tokens=1600, context_length=128000
    )["session_id"]
    server.post_json("/api/approval/yolo", {"session_id": sid, "enabled": True})
    goto_app(page, f"/#/s/{sid}")
    expect(page.locator("#yolo-indicator")).to_be_visible()
    expect(page.locator("#model-picker")).to_be_visible()
    # The phone header first, as the page opens on a phone (the unfixed page wrapped to three rows).
    page.set_viewport_size({"width": 390, "height": 844})
    expect(page.locator("#context-meter")).to_be_visible()
    assert page.evaluate(HEADER_ROWS) <= 2
    for width in (1024, 1280):
        page.set_viewport_size({"width": width, "height": 800})
        box = page.locator("#chat-title").bounding_box()
        assert box and box["width"] >= 160, (width, box)
    page.set_viewport_size({"width": 390, "height": 844})
    expect(page.locator("#yolo-indicator")).to_be_visible()
    height = page.locator(".chat-head").bounding_box()["height"]
    title = page.locator("#chat-title").bounding_box()
    rows = page.evaluate(HEADER_ROWS)
    assert rows <= 2, (rows, height)
    assert title["width"] >= 120, title
    assert not page.evaluate(CONTROLS_OVERLAP)
    page.set_viewport_size({"width": 1280, "height": 800})
    screenshots(page, "header-not-asking")
    server.post_json("/api/approval/yolo", {"session_id": sid, "enabled": False})


def _overlap(a: dict, b: dict) -> bool:
    return not (
        a["x"] + a["width"] <= b["x"]
        or b["x"] + b["width"] <= a["x"]
        or a["y"] + a["height"] <= b["y"]
        or b["y"] + b["height"] <= a["y"]
    )


def test_the_branch_line_is_whole_and_the_toast_leaves_it_readable(page, server, llm):
    """The "Branch of …" line clipped the row below it, and the "Branched into a new session." toast
    covered it."""
    parent = import_session(server, "Trip to the coast", qa_history(3, answer_repeat=3))["session_id"]
    goto_app(page, f"/#/s/{parent}")
    page.locator(".msg-assistant").first.get_by_role(
        "button", name="Branch a new session from this message"
    ).click()
    expect(page.locator("#lineage")).to_contain_text("Branch of Trip to the coast")
    toast = page.locator(".toast", has_text="Branched into a new session.")
    expect(toast).to_be_visible()
    for viewport in ({"width": 1280, "height": 800}, {"width": 390, "height": 844}):
        page.set_viewport_size(viewport)
        page.wait_for_timeout(350)
        line = page.locator("#lineage").bounding_box()
        assert not _overlap(line, toast.bounding_box()), viewport
        # The line is whole: its text fits its box, and the transcript starts below it.
        assert page.evaluate(
            "() => { const n = document.getElementById('lineage'); return n.scrollHeight <= n.clientHeight + 1; }"
        )
        assert page.locator("#transcript").bounding_box()["y"] >= line["y"] + line["height"] - 0.5, viewport
        assert not page.evaluate(CONTROLS_OVERLAP), viewport
    page.set_viewport_size({"width": 1280, "height": 800})
    screenshots(page, "branch-line-and-toast")

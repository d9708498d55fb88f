"""Content search in a real browser: results ranked by the server's index, each snippet showing the
words matched anywhere in the message marked, the message's own markup kept as text."""

from __future__ import annotations

import uuid

import pytest
from playwright.sync_api import expect

from .helpers import PHONE, goto_app, import_session, screenshot, screenshots

pytestmark = pytest.mark.e2e


def test_words_found_apart_in_a_message_are_each_marked_and_markup_stays_text(page, server):
    """Search matched only the exact text typed, so two words apart found nothing, and a snippet marked
    only that text."""
    tag = uuid.uuid4().hex[:6]
    spice, dish = f"saffron{tag}", f"paella{tag}"
    best = import_session(
        server,
        f"Dinner plans {tag}",
        [
            {"role": "user", "content": f"How much {spice} goes in a {dish}?"},
            {"role": "assistant", "content": f"A pinch of **{spice}** <i>per</i> {dish}; {spice} is costly."},
        ],
    )
    import_session(
        server,
        f"Shopping {tag}",
        [
            {"role": "user", "content": f"Buy rice for the {dish}, and some {spice} if the shop has it."},
            {"role": "assistant", "content": "Noted."},
        ],
    )
    goto_app(page)
    page.fill("#session-filter", f"{dish} {spice}")
    rows = page.locator(".matches .session-row")
    expect(rows).to_have_count(2)
    first = rows.first.locator(".session-snippet")
    expect(first.locator("mark").first).to_be_visible()
    marks = {text.lower() for text in first.locator("mark").all_inner_texts()}
    assert marks == {spice, dish}
    expect(page.locator(".matches .session-snippet i")).to_have_count(0)  # the message's own tags are text
    assert best["title"] in rows.first.inner_text() or best["title"] in rows.nth(1).inner_text()
    screenshots(page, "search-index-results")
    page.set_viewport_size(PHONE)
    page.click("#open-sidebar")
    page.wait_for_function("() => document.getElementById('sidebar').getBoundingClientRect().left >= 0")
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        screenshot(page, f"search-index-results-phone-drawer-{scheme}")

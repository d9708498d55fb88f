"""A 5,000-message session: the page opens a window of recent messages fast and pages older ones in."""

from __future__ import annotations

import time

import pytest
from playwright.sync_api import expect

from talaria_testing.transcripts import long_transcript

from .helpers import goto_app, open_page, screenshot, session_store, start_server

pytestmark = pytest.mark.e2e

MESSAGES = 5000
OPEN_BUDGET_S = 1.0


@pytest.fixture(scope="module")
def long_server(tmp_path_factory, llm):
    ids = {}

    def prepare(server):
        with session_store(server.session_dir) as models:
            session = models.Session(title="Five thousand messages", messages=long_transcript(MESSAGES))
            session.save(skip_index=True)
            ids["long"] = session.session_id

    with start_server(tmp_path_factory.mktemp("talaria-long"), llm, prepare=prepare) as srv:
        srv.long_id = ids["long"]
        yield srv


@pytest.fixture
def long_page(browser, long_server):
    with open_page(browser, long_server.base_url) as page:
        yield page


def test_a_5000_message_session_opens_in_under_a_second(long_page, long_server, record_property):
    page = long_page
    goto_app(page)
    row = page.locator("#session-list .session-row", has_text="Five thousand messages")
    expect(row.locator(".session-meta")).to_contain_text(f"{MESSAGES} messages")
    started = time.perf_counter()
    row.locator(".session-open").click()
    page.wait_for_function("() => performance.getEntriesByName('talaria:open').length > 0")
    wall = time.perf_counter() - started
    in_page = page.evaluate("performance.getEntriesByName('talaria:open')[0].duration") / 1000
    last = page.locator(f'.msg[data-idx="{MESSAGES - 1}"]')
    expect(last).to_be_in_viewport()
    rendered = page.locator("#messages .msg").count()
    record_property("open_seconds_wall", round(wall, 3))
    record_property("open_seconds_in_page", round(in_page, 3))
    print(
        f"\n5,000-message session: opened in {in_page * 1000:.0f} ms in page, {wall * 1000:.0f} ms wall; {rendered} rows rendered"
    )
    screenshot(page, "long-session")
    assert rendered <= 100
    assert in_page < OPEN_BUDGET_S
    assert wall < OPEN_BUDGET_S


def test_scrolling_up_loads_older_pages_without_jumping(long_page, long_server):
    page = long_page
    goto_app(page, f"/#/s/{long_server.long_id}")
    expect(page.locator(f'.msg[data-idx="{MESSAGES - 1}"]')).to_be_attached()
    first_before = int(page.locator("#messages .msg").first.get_attribute("data-idx"))
    for _ in range(3):
        top = page.locator("#messages .msg").first
        idx = top.get_attribute("data-idx")
        page.evaluate("document.getElementById('transcript').scrollTop = 0")
        expect(page.locator("#messages .msg").first).not_to_have_attribute("data-idx", idx)
        # The row that was at the top stays where the reader left it (near the top of the view).
        offset = page.evaluate(
            "(i) => document.querySelector(`.msg[data-idx='${i}']`).getBoundingClientRect().top"
            " - document.getElementById('transcript').getBoundingClientRect().top",
            idx,
        )
        assert -50 <= offset <= 400
    first_after = int(page.locator("#messages .msg").first.get_attribute("data-idx"))
    assert first_after <= first_before - 300
    indices = [
        int(i) for i in page.eval_on_selector_all("#messages .msg", "els => els.map(e => e.dataset.idx)")
    ]
    assert indices == list(range(first_after, MESSAGES))

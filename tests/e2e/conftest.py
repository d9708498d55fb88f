"""Browser fixtures: Debian's Chromium through Playwright, the real server in a subprocess, the fake LLM.

Every page a test gets is watched: a console error, an uncaught exception, a failed request or an HTTP
error answer fails the test at teardown.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .helpers import PHONE, open_page, start_server

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(scope="session")
def playwright_instance():
    sync_api = pytest.importorskip("playwright.sync_api")
    # The first turn of a fresh server builds the agent (plugin discovery, imports): a few seconds.
    sync_api.expect.set_options(timeout=20000)
    if not Path(CHROMIUM).exists():
        pytest.fail(
            f"{CHROMIUM} is missing: scripts/test.sh installs Debian's chromium (or deselect with -m 'not e2e')"
        )
    with sync_api.sync_playwright() as pw:
        yield pw


@pytest.fixture(scope="session")
def browser(playwright_instance):
    browser = playwright_instance.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
    yield browser
    browser.close()


@pytest.fixture(scope="session")
def llm():
    from talaria_testing.fake_llm import FakeLLM

    with FakeLLM() as server:
        yield server


@pytest.fixture(autouse=True)
def _fresh_llm(request):
    """Each test starts with empty reply queues (only when the test uses the fake)."""
    if "llm" in request.fixturenames:
        with request.getfixturevalue("llm").fresh():
            yield
    else:
        yield


@pytest.fixture(scope="module")
def server(tmp_path_factory, llm):
    with start_server(tmp_path_factory.mktemp("talaria-e2e"), llm) as srv:
        yield srv


@pytest.fixture
def page(browser, server):
    with open_page(browser, server.base_url) as page:
        yield page


@pytest.fixture
def phone_page(browser, server):
    with open_page(browser, server.base_url, viewport=PHONE, color_scheme="dark") as page:
        yield page

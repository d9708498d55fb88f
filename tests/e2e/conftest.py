"""Browser fixtures: Debian's Chromium through Playwright, the real server in a subprocess, the fake LLM.

Every page a test gets is watched: a console error, an uncaught exception, a failed request or an HTTP
error answer fails the test at teardown.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import pytest

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
DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/e2e/" in str(item.fspath).replace(os.sep, "/"):
            item.add_marker(pytest.mark.e2e)


@pytest.fixture(scope="session")
def playwright_instance():
    sync_api = pytest.importorskip("playwright.sync_api")
    # The first turn of a fresh server builds the agent (plugin discovery, imports): a few seconds.
    sync_api.expect.set_options(timeout=20000)
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: scripts/test.sh installs Debian's chromium (or deselect with -m 'not e2e')")
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
        llm = request.getfixturevalue("llm")
        llm.reset()
        yield
        llm.release()
    else:
        yield


def start_server(root: Path, llm, *, password: str | None = None, prepare=None):
    """The real server with its agent pointed at the fake LLM; ``prepare(server)`` runs before start."""
    from talaria_testing.fake_llm import write_hermes_config
    from talaria_testing.server_proc import ServerProc

    server = ServerProc(root, password=password, env={"TALARIA_AGENT_TOOLSETS": "todo", "TALARIA_CHECKPOINT_INTERVAL": "0.5"})
    server.hermes_home.mkdir(parents=True, exist_ok=True)
    write_hermes_config(server.hermes_home, llm.base_url)
    if prepare is not None:
        server.session_dir.mkdir(parents=True, exist_ok=True)
        prepare(server)
    return server.start()


@pytest.fixture(scope="module")
def server(tmp_path_factory, llm):
    srv = start_server(tmp_path_factory.mktemp("talaria-e2e"), llm)
    yield srv
    srv.stop()


class PageGuard:
    """Collects everything that must not happen on a healthy page."""

    def __init__(self, page):
        self.problems: list[str] = []
        self.allowed_statuses: set[int] = set()
        page.on("console", self._console)
        page.on("pageerror", lambda exc: self.problems.append(f"page error: {exc}"))
        page.on("requestfailed", lambda req: self.problems.append(f"request failed: {req.method} {req.url} ({req.failure})"))
        page.on("response", self._response)

    def _console(self, msg) -> None:
        if msg.type == "error":
            self.problems.append(f"console error: {msg.text}")

    def _response(self, response) -> None:
        if response.status >= 400 and response.status not in self.allowed_statuses:
            self.problems.append(f"HTTP {response.status}: {response.request.method} {response.url}")


@contextlib.contextmanager
def open_page(browser, base_url: str, *, viewport=DESKTOP, color_scheme="light"):
    """A fresh browser context and page; on a clean exit the page must not have logged any problem."""
    context = browser.new_context(viewport=viewport, color_scheme=color_scheme, accept_downloads=True)
    page = context.new_page()
    page.set_default_timeout(15000)
    page.guard = PageGuard(page)
    page.base = base_url
    try:
        yield page
        # Let late responses and console messages arrive before judging the page.
        page.wait_for_timeout(150)
        assert not page.guard.problems, "the page was not clean:\n" + "\n".join(page.guard.problems)
    finally:
        context.close()


@pytest.fixture
def page(browser, server):
    with open_page(browser, server.base_url) as page:
        yield page


@pytest.fixture
def phone_page(browser, server):
    with open_page(browser, server.base_url, viewport=PHONE, color_scheme="dark") as page:
        yield page

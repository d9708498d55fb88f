"""The installable app in Chromium: the manifest and the service worker are served and registered, the
worker's cache holds the page's static files alone (never an /api/ answer), and offline the shell loads
and says the server cannot be reached."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from .helpers import goto_app, import_session, open_page

pytestmark = pytest.mark.e2e


@pytest.fixture
def page(browser, server):
    """A fresh page whose service worker may install (the other e2e tests block it)."""
    with open_page(browser, server.base_url, service_workers="allow") as page:
        yield page


CACHED = """async () => {
  const found = {};
  for (const name of await caches.keys()) {
    const cache = await caches.open(name);
    found[name] = (await cache.keys()).map((request) => new URL(request.url).pathname);
  }
  return found;
}"""


def worker_ready(page) -> dict:
    return page.evaluate(
        """async () => {
          const reg = await navigator.serviceWorker.ready;
          return { scope: new URL(reg.scope).pathname, script: new URL(reg.active.scriptURL).pathname };
        }"""
    )


def test_the_manifest_and_the_worker_are_served_and_registered_for_the_whole_origin(page):
    goto_app(page)
    assert worker_ready(page) == {"scope": "/", "script": "/sw.js"}
    manifest = page.evaluate(
        """async () => {
          const link = document.querySelector('link[rel="manifest"]');
          const answer = await fetch(link.href);
          return { type: answer.headers.get("content-type"), body: await answer.json() };
        }"""
    )
    assert manifest["type"] == "application/manifest+json"
    assert manifest["body"]["name"] == "Talaria" and manifest["body"]["display"] == "standalone"
    colours = page.evaluate(
        "() => [...document.querySelectorAll('meta[name=theme-color]')].map((m) => [m.media, m.content])"
    )
    assert [media for media, _ in colours] == [
        "(prefers-color-scheme: light)",
        "(prefers-color-scheme: dark)",
    ]


def test_the_worker_caches_the_static_shell_and_never_an_api_answer(page, server):
    sid = import_session(server, "Private words", [{"role": "user", "content": "a secret"}])["session_id"]
    goto_app(page)
    worker_ready(page)
    # Read again under the worker's control: the page, a session and the session list.
    goto_app(page, f"/#/s/{sid}")
    page.reload()
    page.wait_for_selector("#app:not([hidden])")
    assert page.evaluate("() => navigator.serviceWorker.controller !== null")
    expect(page.locator(".msg-user")).to_contain_text("a secret")
    page.evaluate(f"() => fetch('/api/session?session_id={sid}').then((r) => r.json())")
    page.evaluate("() => fetch('/api/sessions').then((r) => r.json())")
    cached = page.evaluate(CACHED)
    assert list(cached) and all(name.startswith("talaria-shell-") for name in cached), cached
    paths = [path for urls in cached.values() for path in urls]
    assert "/" in paths and "/static/js/app.js" in paths and "/static/css/app.css" in paths
    assert all(path == "/" or path.startswith("/static/") for path in paths), paths
    assert not [path for path in paths if path.startswith("/api/")]


def test_offline_the_shell_loads_and_says_the_server_cannot_be_reached(page):
    goto_app(page)
    worker_ready(page)
    page.reload()  # the worker now controls the page and has its shell cached
    page.wait_for_selector("#app:not([hidden])")
    assert page.evaluate("() => navigator.serviceWorker.controller !== null")
    page.context.set_offline(True)
    try:
        page.reload()
        expect(page.locator("#boot")).to_contain_text("Talaria cannot reach its server")
    finally:
        page.context.set_offline(False)
    # Offline, the page's requests to the server fail: that is what this test is about.
    page.guard.problems.clear()

"""Helpers shared by the browser tests: screenshots, writing session files, common page actions."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

REPO_DIR = Path(__file__).resolve().parents[2]
SCREENSHOT_DIR = REPO_DIR / "artifacts" / "screenshots"


def screenshot(page, name: str) -> Path:
    SCREENSHOT_DIR.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOT_DIR / f"{name}.png"
    page.screenshot(path=str(path))
    return path


@contextlib.contextmanager
def session_store(session_dir: Path):
    """Binds ``api.models`` to another server's session folder while a test writes files into it."""
    import api.models as models

    saved = (models.SESSION_DIR, models.SESSION_INDEX_FILE)
    models.SESSION_DIR = Path(session_dir)
    models.SESSION_INDEX_FILE = Path(session_dir) / "_index.json"
    with models.LOCK:
        models.SESSIONS.clear()
    try:
        yield models
    finally:
        from api import session_index

        session_index.rebuild_index_file(models.SESSION_DIR, models.SESSION_INDEX_FILE)
        session_index.forget(models.SESSION_DIR)
        models.SESSION_DIR, models.SESSION_INDEX_FILE = saved
        with models.LOCK:
            models.SESSIONS.clear()


def wait_until(predicate, timeout: float = 10.0, interval: float = 0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError("condition not met in time")


def goto_app(page, path: str = "/"):
    page.goto(page.base + path)
    page.wait_for_selector("#app:not([hidden])")
    page.wait_for_selector("#session-list .session-row, #session-list .list-empty", state="attached")
    return page


def send(page, text: str) -> None:
    box = page.locator("#composer-input")
    box.fill(text)
    box.press("Enter")


def wait_turn_done(page, timeout: float = 30000) -> None:
    page.wait_for_selector("#stop", state="hidden", timeout=timeout)
    page.wait_for_selector(".msg.live", state="detached", timeout=timeout)


def import_session(server, title: str, messages: list[dict], **fields) -> dict:
    """A session with the given messages, written through the server's import route."""
    base = time.time() - 600
    stamped = [{**m, "timestamp": m.get("timestamp", base + i)} for i, m in enumerate(messages)]
    return server.post_json("/api/session/import", {"title": title, "messages": stamped, **fields})["session"]


def transcript_state(page) -> list[dict]:
    """What a person sees in the transcript, row by row (role, text, tool cards, markers)."""
    return page.evaluate(
        """() => [...document.querySelectorAll('#messages > *')].map((node) => ({
            cls: node.className.replace(/\\s*(highlight|pending)\\b/g, ''),
            idx: node.dataset.idx ?? null,
            text: node.innerText,
            html: node.querySelector('.msg-body')?.innerHTML ?? null,
        }))"""
    )

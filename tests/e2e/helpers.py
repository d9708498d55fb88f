"""Helpers shared by the browser tests: screenshots, writing session files, common page actions."""

from __future__ import annotations

import contextlib
import re
import socket
import threading
import time
from pathlib import Path

REPO_DIR = Path(__file__).resolve().parents[2]
SCREENSHOT_DIR = REPO_DIR / "artifacts" / "screenshots"
DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}


def start_server(root: Path, llm, *, password: str | None = None, prepare=None):
    """The real server with its agent pointed at the fake LLM; ``prepare(server)`` runs before start."""
    from talaria_testing.fake_llm import agent_server

    env = {
        "TALARIA_CHECKPOINT_INTERVAL": "0.5",
        # Workspaces a test chooses live under the server's own folder.
        "TALARIA_WORKSPACE_ROOTS": str(root),
    }
    server = agent_server(root, llm.base_url, toolsets="todo", env=env, password=password)
    if prepare is not None:
        server.session_dir.mkdir(parents=True, exist_ok=True)
        prepare(server)
    return server.start()


def asking_server(root: Path, llm, toolsets: str):
    """The real server whose agent asks the person before a dangerous command (manual approvals)."""
    from talaria_testing.fake_llm import agent_server

    env = {"TALARIA_WORKSPACE_ROOTS": str(root), "TALARIA_CHECKPOINT_INTERVAL": "0.5"}
    manual = {"approvals": {"mode": "manual"}}
    return agent_server(root, llm.base_url, toolsets=toolsets, env=env, extra=manual)


class PageGuard:
    """Collects everything that must not happen on a healthy page."""

    def __init__(self, page):
        self.problems: list[str] = []
        self.allowed_statuses: set[int] = set()
        self._page = page
        self._navigations = 0
        self._issued_at: dict = {}  # request -> navigations seen when it was issued
        self._aborted: list[str] = []  # aborts no navigation has explained yet
        page.on("console", self._console)
        page.on("pageerror", lambda exc: self.problems.append(f"page error: {exc}"))
        page.on("request", self._request)
        page.on("framenavigated", self._navigated)
        page.on("requestfailed", self._request_failed)
        page.on("requestfinished", lambda request: self._issued_at.pop(request, None))
        page.on("response", self._response)

    def _request(self, request) -> None:
        self._issued_at[request] = self._navigations

    # The browser aborts what is in flight when the page navigates or reloads (the sidebar feed, a poll,
    # the icon), and reports the abort before or after the navigation; an abort with no navigation after
    # its request was issued stays a problem.
    def _navigated(self, frame) -> None:
        if frame != self._page.main_frame:
            return
        self._navigations += 1
        excused = set(self._aborted)
        self._aborted.clear()
        self.problems[:] = [p for p in self.problems if p not in excused]

    def _request_failed(self, request) -> None:
        issued_at = self._issued_at.pop(request, self._navigations)
        # The sidebar feed never ends by itself: leaving or closing the page aborts it.
        if "/api/sessions/feed" in request.url and request.failure == "net::ERR_ABORTED":
            return
        if request.failure == "net::ERR_ABORTED":
            if issued_at < self._navigations:
                return
            text = f"request failed: {request.method} {request.url} ({request.failure})"
            self._aborted.append(text)
            self.problems.append(text)
            return
        self.problems.append(f"request failed: {request.method} {request.url} ({request.failure})")

    def _console(self, msg) -> None:
        if msg.type != "error":
            return
        # The browser logs every refused resource too; a status the test expects is not a problem.
        match = re.match(r"Failed to load resource: the server responded with a status of (\d+)", msg.text)
        if match and int(match.group(1)) in self.allowed_statuses:
            return
        self.problems.append(f"console error: {msg.text}")

    def _response(self, response) -> None:
        if response.status >= 400 and response.status not in self.allowed_statuses:
            self.problems.append(f"HTTP {response.status}: {response.request.method} {response.url}")


@contextlib.contextmanager
def open_tabs(
    browser,
    base_url: str,
    count: int,
    *,
    viewport=DESKTOP,
    color_scheme="light",
    permissions=(),
    service_workers="block",
):
    """``count`` pages of one fresh browser context (tabs of one person) granted ``permissions``; on a
    clean exit no page may have logged any problem. The page's service worker is blocked unless asked for
    (``service_workers="allow"``): installing it fetches the whole shell again in every fresh context."""
    context = browser.new_context(
        viewport=viewport,
        color_scheme=color_scheme,
        accept_downloads=True,
        permissions=list(permissions),
        service_workers=service_workers,
    )
    pages = []
    for _ in range(count):
        page = context.new_page()
        page.set_default_timeout(15000)
        page.guard = PageGuard(page)
        page.base = base_url
        pages.append(page)
    try:
        yield pages
        # Let late responses and console messages arrive before judging the pages.
        pages[0].wait_for_timeout(150)
        problems = [problem for page in pages for problem in page.guard.problems]
        assert not problems, "the page was not clean:\n" + "\n".join(problems)
    finally:
        context.close()


@contextlib.contextmanager
def open_page(browser, base_url: str, *, viewport=DESKTOP, color_scheme="light", service_workers="block"):
    """A fresh browser context and page; on a clean exit the page must not have logged any problem."""
    with open_tabs(
        browser, base_url, 1, viewport=viewport, color_scheme=color_scheme, service_workers=service_workers
    ) as (page,):
        yield page


GREETING = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello."}]


@contextlib.contextmanager
def tabs_on_session(browser, server, sid: str, count: int = 2):
    """``count`` tabs of one person (``open_tabs``), each open on session ``sid``."""
    with open_tabs(browser, server.base_url, count) as pages:
        for page in pages:
            goto_app(page, f"/#/s/{sid}")
        yield pages


def screenshot(page, name: str) -> Path:
    SCREENSHOT_DIR.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOT_DIR / f"{name}.png"
    page.screenshot(path=str(path))
    return path


@contextlib.contextmanager
def session_store(session_dir: Path):
    """A store on another server's session folder, in use while a test writes files into it."""
    import api.store.models as models
    from api.store import session_store as store

    built = store.Store(Path(session_dir), models.Session)
    previous = store.use(built)
    try:
        yield models
    finally:
        built.index.rebuild_index_file(built.session_dir, built.index_file)
        built.index.forget(built.session_dir)
        store.use(previous)


def goto_app(page, path: str = "/"):
    page.goto(page.base + path)
    page.wait_for_selector("#app:not([hidden])")
    page.wait_for_selector("#session-list .session-row, #session-list .list-empty", state="attached")
    return page


def turns_done(page) -> int:
    return int(page.locator("#transcript").get_attribute("data-turns-done") or 0)


def send(page, text: str) -> int:
    """Types and sends a message; returns the finished-turn count from before, for ``wait_turn_done``."""
    before = turns_done(page)
    box = page.locator("#composer-input")
    box.fill(text)
    box.press("Enter")
    return before


def wait_turn_done(page, before: int, timeout: float = 30000) -> None:
    """Waits until a turn started after ``before`` finished and the transcript was re-rendered."""
    page.wait_for_function(
        "(n) => Number(document.getElementById('transcript').dataset.turnsDone || 0) > n",
        arg=before,
        timeout=timeout,
    )
    page.wait_for_selector(".msg.live", state="detached", timeout=timeout)
    page.wait_for_selector("#stop", state="hidden", timeout=timeout)


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
            text: node.textContent,  // not innerText: off-screen rows (content-visibility) have none
            html: node.querySelector('.msg-body')?.innerHTML ?? null,
        }))"""
    )


class DroppingProxy:
    """A TCP relay in front of the server that cuts the first chat stream after ``cut_after`` events.

    The cut is a clean end of the connection, as when a network drops and the socket closes; what the
    browser sends on its reconnect (``Last-Event-ID``) and what the server answers are recorded.
    """

    def __init__(self, upstream_port: int, cut_after: int = 6):
        self.upstream_port = upstream_port
        self.cut_after = cut_after
        self.streams: list[dict] = []  # per stream request: headers, first event id seen
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self) -> None:
        self._closed = True
        self._listener.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = client.recv(65536)
            if not chunk:
                break
            head += chunk
        upstream.sendall(head)
        request_line, _, rest = head.partition(b"\r\n")
        stream = None
        if b" /api/chat/stream?" in request_line:
            headers = {}
            for line in rest.split(b"\r\n\r\n", 1)[0].split(b"\r\n"):
                name, _, value = line.decode("latin-1").partition(":")
                headers[name.strip().lower()] = value.strip()
            with self._lock:
                stream = {"headers": headers, "first_id": None, "cut": not self.streams}
                self.streams.append(stream)
        threading.Thread(target=self._pump, args=(client, upstream), daemon=True).start()
        self._relay_back(upstream, client, stream)

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while chunk := src.recv(65536):
                dst.sendall(chunk)
        except OSError:
            pass

    def _relay_back(self, upstream: socket.socket, client: socket.socket, stream: dict | None) -> None:
        buffer = b""
        in_body = False
        events = 0
        try:
            while chunk := upstream.recv(65536):
                if stream is None:
                    client.sendall(chunk)
                    continue
                buffer += chunk
                if not in_body:
                    if b"\r\n\r\n" not in buffer:
                        continue
                    header, buffer = buffer.split(b"\r\n\r\n", 1)
                    client.sendall(header + b"\r\n\r\n")
                    in_body = True
                while b"\n\n" in buffer:
                    frame, buffer = buffer.split(b"\n\n", 1)
                    client.sendall(frame + b"\n\n")
                    if frame.startswith(b"id: "):
                        events += 1
                        if stream["first_id"] is None:
                            stream["first_id"] = int(frame.split(b"\n", 1)[0][4:])
                        if stream["cut"] and events >= self.cut_after:
                            return  # the network drops here
        except OSError:
            pass
        finally:
            for sock in (client, upstream):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                sock.close()


def screenshots(page, name: str) -> list[Path]:
    """The page as it is, at desktop and phone width, light and dark; the page is left as it was."""
    size = page.viewport_size
    paths = []
    try:
        for width_name, viewport in (("desktop", DESKTOP), ("phone", PHONE)):
            page.set_viewport_size(viewport)
            page.wait_for_timeout(350)  # let the sidebar's slide transition settle
            for scheme in ("light", "dark"):
                page.emulate_media(color_scheme=scheme)
                paths.append(screenshot(page, f"{name}-{width_name}-{scheme}"))
    finally:
        page.set_viewport_size(size)
        page.emulate_media(color_scheme="light")
    return paths


def new_session(page) -> str:
    """Opens the app, starts a new session and returns its id."""
    from playwright.sync_api import expect

    goto_app(page)
    page.click("#new-session")
    page.wait_for_url(re.compile(r"#/s/[A-Za-z0-9_-]+$"))
    expect(page.locator("#chat-title")).to_have_text("Untitled")
    return page.url.rsplit("/", 1)[1]


def open_files_panel(page):
    """Opens the files panel beside the chat (a drawer on phones) and returns it."""
    from playwright.sync_api import expect

    page.locator("#files-toggle").click()
    panel = page.locator("#files-panel")
    expect(panel).to_be_visible()
    return panel


def qa_history(turns: int, answer_repeat: int = 150) -> list[dict]:
    """``turns`` question/answer pairs with long answers."""
    rows = []
    for i in range(turns):
        rows.append({"role": "user", "content": f"Question number {i}: tell me about topic {i}."})
        rows.append({"role": "assistant", "content": f"Topic {i} is interesting. " * answer_repeat})
    return rows


def restore_turn(page, changes):
    """Restore the turn whose changes box is ``changes`` and confirm; the toast that offers the undo."""
    from playwright.sync_api import expect

    changes.get_by_role("button", name="Restore this turn").click()
    page.locator(".modal").get_by_role("button", name="Restore").click()
    toast = page.locator(".toast", has_text="The turn is restored")
    expect(toast).to_be_visible()
    return toast


def undo_restore(page, toast) -> None:
    from playwright.sync_api import expect

    toast.get_by_role("button", name="Undo").click()
    expect(page.locator(".toast").last).to_contain_text("The restore is undone.")

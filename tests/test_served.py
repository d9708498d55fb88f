"""Each request is served by its server's app: two apps served at once by two real servers in one process keep
their own turns, jobs and feed, and each request acts on the store of the app that serves it (its sessions,
edits, drafts, projects, files panel and turns); a route handler called outside a server is served by what is in
use."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request

import pytest

from api.agent import agent_runtime, approvals, turn_journal
from api.agent.turn_journal import Turn
from api.server import app_server
from api.server.app import App
from api.services import compression, session_feed
from api.store import config, models
from api.store import session_store as store
from api.web import routes_control
from api.web.served import InUseApp, app_of
from talaria_testing import scripted_turns


def _get(port, path):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as reply:
            return reply.status, reply.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def _post(port, path, body):
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as reply:
            return reply.status, json.loads(reply.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")


@pytest.fixture
def two_served(tmp_path):
    """Two apps, each on its own store (``tmp_path/<name>/sessions``, its state folder ``tmp_path/<name>``), each
    served by its own server; the second built last (in use)."""
    previous = store.in_use()
    apps, servers = [], []
    try:
        for name in ("one", "two"):
            folder = tmp_path / name / "sessions"
            folder.mkdir(parents=True)
            app = App(store=store.Store(folder, models.Session))
            apps.append(app)
            server = app_server.make_server(app, "127.0.0.1", 0, threads=2)
            servers.append(server)
            threading.Thread(target=server.serve_forever, name=f"served-{name}", daemon=True).start()
        yield list(zip(apps, (server.server_address[1] for server in servers), strict=True))
    finally:
        for server in servers:
            server.shutdown()
            server.server_close()
        for app in reversed(apps):
            app.close()
            app.release()
        store.use(previous)


def _finished_turn(stream_id):
    turn = Turn(stream_id, "s1", "hello", time.time())
    turn.append("done", {"session": None})
    return turn


def test_two_servers_in_one_process_serve_their_own_apps_turns_jobs_and_feed(two_served):
    (first, first_port), (second, second_port) = two_served
    turn = _finished_turn("a" * 32)
    first.turns.start(turn)
    first.turns.end(turn)
    turn.finish()
    status, body = _get(first_port, f"/api/chat/stream?stream_id={turn.stream_id}")
    assert status == 200 and b"event: done" in body
    assert (
        _get(second_port, f"/api/chat/stream?stream_id={turn.stream_id}")[0] == 404
    )  # not the second's turn

    first.jobs._jobs["s1"] = {"status": "done", "started_at": 1.0, "finished_at": time.time()}  # noqa: SLF001
    assert json.loads(_get(first_port, "/api/session/compress/status?session_id=s1")[1])["status"] == "done"
    assert json.loads(_get(second_port, "/api/session/compress/status?session_id=s1")[1])["status"] == "idle"

    before = [json.loads(_get(port, "/api/sessions")[1])["feed_seq"] for port in (first_port, second_port)]
    first.feed.record("s1", None)
    first.feed.record("s2", None)
    after = [json.loads(_get(port, "/api/sessions")[1])["feed_seq"] for port in (first_port, second_port)]
    assert after == [before[0] + 2, before[1]]


class _Bare:
    """A handler outside any server, as hermes-webui's tests call route handlers."""

    def __init__(self):
        self.answers = []


def test_a_handler_outside_a_server_is_served_by_what_is_in_use(app, monkeypatch):
    served = app_of(_Bare())
    assert isinstance(served, InUseApp) and served.auth is None and served.startup_recovery is None
    assert served.turns is turn_journal.TURNS.get() is app.turns
    assert served.jobs is compression.JOBS.get() is app.jobs and served.feed is session_feed.changes()
    assert served.store is models.store() is app.store and served.approvals is app.approvals
    assert served.indexing is app.indexing and served.work is app.work
    with pytest.raises(AttributeError):
        _ = served.no_such_part

    answered = []
    monkeypatch.setattr(routes_control, "j", lambda handler, payload: answered.append(payload))
    monkeypatch.setattr(approvals.session_lookup, "load_session", lambda sid, store=None: None)
    routes_control._handle_approval_yolo(_Bare(), {"session_id": "s1", "enabled": True})  # noqa: SLF001
    assert answered[-1]["yolo"] is True and "s1" in app.yolo  # the app in use's switches


# ---------------------------------------------------------------------- each request acts on its app's store


def _on_disk(app, sid):
    """The session's file in ``app``'s folder, as JSON (None: no file)."""
    path = app.store.session_dir / f"{sid}.json"
    return json.loads(path.read_bytes()) if path.exists() else None


def _same_session_in_both(two_served, tmp_path, **fields):
    """One session id with a file in each app's folder: each its own title and workspace (``tmp_path/<n>-work``)."""
    (first, _), (second, _) = two_served
    sid = "shared"
    for number, app in enumerate((first, second)):
        work = tmp_path / f"{number}-work"
        work.mkdir(exist_ok=True)
        (work / f"only-in-{number}.txt").write_text(f"workspace {number}\n")
        app.store.create(models.Session(session_id=sid, title=f"app {number}", workspace=str(work), **fields))
    return sid


def test_a_session_created_through_one_app_is_unknown_to_the_other(two_served):
    (first, first_port), (second, second_port) = two_served
    status, created = _post(first_port, "/api/session/new", {"title": "made in one"})
    assert status == 200
    sid = created["session"]["session_id"]
    assert _on_disk(first, sid)["title"] == "made in one" and _on_disk(second, sid) is None
    assert _get(first_port, f"/api/session?session_id={sid}")[0] == 200
    assert _get(second_port, f"/api/session?session_id={sid}")[0] == 404
    assert _post(second_port, "/api/session/rename", {"session_id": sid, "title": "x"})[0] == 404
    listed = [row["session_id"] for row in json.loads(_get(second_port, "/api/sessions")[1])["sessions"]]
    assert sid not in listed
    assert json.loads(_get(first_port, "/health")[1])["sessions"] == 1
    assert json.loads(_get(second_port, "/health")[1])["sessions"] == 0


def test_edits_drafts_and_projects_through_one_app_change_only_its_folder(two_served, tmp_path):
    (first, first_port), (second, second_port) = two_served
    rows = [
        {"role": "user", "content": "one", "timestamp": 1.0},
        {"role": "assistant", "content": "two", "timestamp": 2.0},
    ]
    sid = _same_session_in_both(two_served, tmp_path, messages=rows)
    theirs = _on_disk(second, sid)

    assert _post(first_port, "/api/session/rename", {"session_id": sid, "title": "renamed"})[0] == 200
    assert _post(first_port, "/api/session/pin", {"session_id": sid, "pinned": True})[0] == 200
    assert _post(first_port, "/api/session/draft", {"session_id": sid, "text": "unsent"})[0] == 200
    status, made = _post(first_port, "/api/projects/create", {"name": "Only one"})
    assert status == 200
    project = made["project"]["project_id"]
    assert _post(first_port, "/api/session/move", {"session_id": sid, "project_id": project})[0] == 200
    assert _post(first_port, "/api/session/truncate", {"session_id": sid, "keep_count": 0})[0] == 200

    mine = _on_disk(first, sid)
    assert (mine["title"], mine["pinned"], mine["project_id"]) == ("renamed", True, project)
    assert mine["composer_draft"]["text"] == "unsent" and mine["messages"] == []
    assert json.loads(_get(first_port, f"/api/session/draft?session_id={sid}")[1])["text"] == "unsent"
    assert _on_disk(second, sid) == theirs  # untouched
    assert json.loads(_get(second_port, f"/api/session/draft?session_id={sid}")[1])["text"] == ""
    assert json.loads(_get(second_port, "/api/projects")[1])["projects"] == []
    assert (tmp_path / "one" / "projects.json").exists() and not (tmp_path / "two" / "projects.json").exists()

    status, deleted = _post(first_port, "/api/session/delete", {"session_id": sid})
    assert status == 200 and _on_disk(first, sid) is None
    assert (tmp_path / "one" / "trash" / deleted["undo_token"] / f"{sid}.json").exists()
    assert _on_disk(second, sid) == theirs and not (tmp_path / "two" / "trash").exists()
    assert _get(second_port, f"/api/session?session_id={sid}")[0] == 200


def test_the_files_panel_through_one_app_reads_and_writes_its_sessions_workspace(two_served, tmp_path):
    (first, first_port), (second, second_port) = two_served
    sid = _same_session_in_both(two_served, tmp_path)
    names = [row["name"] for row in json.loads(_get(first_port, f"/api/list?session_id={sid}")[1])["entries"]]
    assert names == ["only-in-0.txt"]
    status, body = _get(first_port, f"/api/file?session_id={sid}&path=only-in-0.txt")
    assert status == 200 and "workspace 0" in json.loads(body)["content"]
    assert _get(first_port, f"/api/file?session_id={sid}&path=only-in-1.txt")[0] == 404
    made = {"session_id": sid, "path": "new.txt", "kind": "file"}
    assert _post(first_port, "/api/file/create", made)[0] == 200
    assert (tmp_path / "0-work" / "new.txt").exists() and not (tmp_path / "1-work" / "new.txt").exists()
    names = [
        row["name"] for row in json.loads(_get(second_port, f"/api/list?session_id={sid}")[1])["entries"]
    ]
    assert names == ["only-in-1.txt"]


def _stream_until_done(port, stream_id):
    status, body = _get(port, f"/api/chat/stream?stream_id={stream_id}")
    assert status == 200 and b"event: done" in body
    return body


def test_a_turn_through_one_app_saves_its_rows_in_that_apps_store_only(two_served, tmp_path, monkeypatch):
    scripted_turns.install(monkeypatch)
    monkeypatch.setattr(agent_runtime, "generate_title", lambda *args, **kwargs: "Titled in one")  # no LLM
    monkeypatch.setitem(config.SETTINGS_VALUES, "workspace_roots", str(tmp_path))
    (first, first_port), (second, second_port) = two_served
    sid = _same_session_in_both(two_served, tmp_path, model="fake")
    theirs = _on_disk(second, sid)
    status, started = _post(first_port, "/api/chat/start", {"session_id": sid, "message": "hello one"})
    assert status == 200, started
    stream_id = started["stream_id"]
    assert _get(second_port, f"/api/chat/stream?stream_id={stream_id}")[0] == 404
    _stream_until_done(first_port, stream_id)
    first.turns.get_turn(stream_id).wait_finished(10)

    mine = _on_disk(first, sid)
    assert [(row["role"], row["content"]) for row in mine["messages"]] == [
        ("user", "hello one"),
        ("assistant", scripted_turns.ANSWER),
    ]
    assert not mine.get("active_stream_id") and not mine.get("pending_user_message")
    row = json.loads(_get(first_port, "/api/sessions")[1])["sessions"][0]
    assert row["session_id"] == sid and row["message_count"] == 2
    deadline = time.time() + 10
    while _on_disk(first, sid)["title"] != "Titled in one" and time.time() < deadline:
        time.sleep(0.02)  # the title is written by a thread of its own after the turn
    assert _on_disk(first, sid)["title"] == "Titled in one"
    assert _on_disk(second, sid) == theirs  # the other app's copy never sees the turn
    payload = json.loads(_get(second_port, f"/api/session?session_id={sid}")[1])["session"]
    assert payload["messages"] == [] and payload["title"] == "app 1"


def test_a_turn_live_in_one_app_holds_back_edits_there_only(two_served, tmp_path):
    (first, first_port), (second, second_port) = two_served
    rows = [{"role": "user", "content": "one", "timestamp": 1.0}]
    sid = _same_session_in_both(two_served, tmp_path, messages=rows)
    turn = Turn("b" * 32, sid, "hello", time.time())
    first.turns.start(turn)
    try:
        for path, body in (
            ("/api/session/truncate", {"session_id": sid, "keep_count": 0}),
            ("/api/session/delete", {"session_id": sid}),
        ):
            assert _post(first_port, path, body)[0] == 409  # streaming in the first app
        assert _on_disk(first, sid)["messages"] == rows
        assert _post(second_port, "/api/session/truncate", {"session_id": sid, "keep_count": 0})[0] == 200
        assert _post(second_port, "/api/session/delete", {"session_id": sid})[0] == 200
        assert _on_disk(second, sid) is None and _on_disk(first, sid)["messages"] == rows
    finally:
        turn.finish()
        first.turns.end(turn)


def test_the_sidebar_says_streaming_for_a_turn_of_the_app_that_serves_it(two_served, tmp_path):
    (first, first_port), (second, second_port) = two_served
    turn = Turn("c" * 32, "shared", "hello", time.time())
    first.turns.start(turn)
    try:
        _same_session_in_both(two_served, tmp_path, active_stream_id=turn.stream_id)
        for port, streaming in ((first_port, True), (second_port, False)):
            rows = json.loads(_get(port, "/api/sessions")[1])["sessions"]
            assert [row.get("is_streaming", False) for row in rows] == [streaming]
    finally:
        turn.finish()
        first.turns.end(turn)


def test_a_compression_job_through_one_app_reads_that_apps_session(two_served):
    (first, first_port), (second, second_port) = two_served
    rows = [{"role": "user", "content": "one", "timestamp": 1.0}]
    first.store.create(models.Session(session_id="only-one", title="one", messages=rows))
    assert _post(second_port, "/api/session/compress/start", {"session_id": "only-one"})[0] == 404
    status, started = _post(first_port, "/api/session/compress/start", {"session_id": "only-one"})
    assert status == 200 and started["status"] == "running"
    deadline = time.time() + 10
    job = {}
    while time.time() < deadline:
        job = json.loads(_get(first_port, "/api/session/compress/status?session_id=only-one")[1])
        if job["status"] != "running":
            break
        time.sleep(0.02)
    # The job's thread found the session in the first app's store: too short to compress, not unknown.
    assert job["status"] == "error" and job["http_status"] == 400 and "Not enough" in job["error"]

"""Projects and the sidebar's bulk actions through the real server: ``/api/projects...``, ``/api/session/move``,
``GET /api/sessions?project_id=`` and ``POST /api/sessions/bulk``; ``projects.json`` as hermes-webui keeps it."""

from __future__ import annotations

import json
import uuid

import pytest

from talaria_testing.server_proc import ServerProc
from talaria_testing.transcripts import conversation

pytestmark = pytest.mark.integration

RED, BLUE = "#e5484d", "#0090ff"


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    server = ServerProc(tmp_path_factory.mktemp("projects"))
    server.start()
    yield server
    server.stop()
    assert "unexpected error" not in server.log_text(), server.log_text()[-4000:]


def _projects_file(srv: ServerProc):
    return srv.state_dir / "projects.json"


def _session(srv: ServerProc, title: str) -> str:
    body = {"title": title, "messages": conversation(f"{title} question", start=1000.0)}
    return srv.post_json("/api/session/import", body)["session"]["session_id"]


def _project(srv: ServerProc, name: str | None = None, color: str = RED) -> dict:
    name = name or f"Project {uuid.uuid4().hex[:6]}"
    return srv.post_json("/api/projects/create", {"name": name, "color": color})["project"]


def _view(srv: ServerProc, project_id: str, **query) -> dict:
    extra = "".join(f"&{k}={v}" for k, v in query.items())
    return srv.get_json(f"/api/sessions?project_id={project_id}{extra}")


def _ids(page: dict) -> list[str]:
    return [row["session_id"] for row in page["sessions"]]


def _file(srv: ServerProc, sid: str) -> dict:
    return json.loads((srv.session_dir / f"{sid}.json").read_text())


# ---------------------------------------------------------------------- the project list


def test_a_project_is_created_renamed_recoloured_and_kept_in_hermes_webuis_file(srv):
    made = _project(srv, "Research", RED)
    assert made["name"] == "Research" and made["color"] == RED and isinstance(made["created_at"], float)
    renamed = srv.post_json(
        "/api/projects/rename", {"project_id": made["project_id"], "name": "  Deep   research "}
    )
    assert renamed["project"]["name"] == "Deep research" and renamed["project"]["color"] == RED
    srv.post_json("/api/projects/rename", {"project_id": made["project_id"], "color": BLUE.upper()})
    listed = {p["project_id"]: p for p in srv.get_json("/api/projects")["projects"]}
    assert (
        listed[made["project_id"]]["name"] == "Deep research" and listed[made["project_id"]]["color"] == BLUE
    )
    stored = {e["project_id"]: e for e in json.loads(_projects_file(srv).read_text())}
    assert set(stored[made["project_id"]]) == {"project_id", "name", "color", "created_at"}
    assert stored[made["project_id"]]["color"] == BLUE


@pytest.mark.parametrize(
    ("route", "body", "status"),
    [
        ("/api/projects/create", {"name": ""}, 400),
        ("/api/projects/create", {"name": "   "}, 400),
        ("/api/projects/create", {"name": 7}, 400),
        ("/api/projects/create", {"name": "x" * 101}, 400),
        ("/api/projects/create", {"name": "bell\x07"}, 400),
        ("/api/projects/create", {"name": "ok", "color": "red"}, 400),
        ("/api/projects/create", {"name": "ok", "color": "#123456"}, 400),
        ("/api/projects/create", {"name": "ok", "color": ["#e5484d"]}, 400),
        ("/api/projects/rename", {"project_id": "../../etc", "name": "x"}, 400),
        ("/api/projects/rename", {"project_id": "a" * 65, "name": "x"}, 400),
        ("/api/projects/rename", {"project_id": None, "name": "x"}, 400),
        ("/api/projects/rename", {"project_id": "nosuchproject", "name": "x"}, 404),
        ("/api/projects/delete", {"project_id": "nosuchproject"}, 404),
        ("/api/projects/delete", {"project_id": {"$ne": 1}}, 400),
        ("/api/session/move", {"session_id": "../x", "project_id": None}, 400),
        ("/api/session/move", {"session_id": "nosuchsession", "project_id": None}, 404),
    ],
)
def test_project_routes_refuse_bad_input_with_a_clear_error_and_change_nothing(srv, route, body, status):
    before = _projects_file(srv).read_bytes() if _projects_file(srv).exists() else None
    code, data = srv.json("POST", route, body)
    assert code == status and isinstance(data["error"], str) and data["error"]
    assert (_projects_file(srv).read_bytes() if _projects_file(srv).exists() else None) == before


def test_a_second_project_of_the_same_name_is_refused(srv):
    _project(srv, "Twin")
    code, data = srv.json("POST", "/api/projects/create", {"name": "twin"})
    assert code == 409 and "twin" in data["error"]


def test_moving_into_an_unknown_project_is_refused_and_the_session_unchanged(srv):
    sid = _session(srv, "Stays")
    code, _ = srv.json("POST", "/api/session/move", {"session_id": sid, "project_id": "nosuchproject"})
    assert code == 404 and _file(srv, sid)["project_id"] is None


# ---------------------------------------------------------------------- the project view


def test_a_moved_session_shows_in_its_projects_view_only_and_keeps_its_place(srv):
    project = _project(srv)
    inside, outside = _session(srv, "Inside"), _session(srv, "Outside")
    before = _file(srv, inside)["updated_at"]
    moved = srv.post_json("/api/session/move", {"session_id": inside, "project_id": project["project_id"]})
    assert moved["session"]["project_id"] == project["project_id"] and moved["previous_project_id"] is None
    page = _view(srv, project["project_id"], limit=100)
    assert _ids(page) == [inside] and page["total"] == 1 and page["agent_sessions"] == []
    assert page["sessions"][0]["project_id"] == project["project_id"]
    assert _file(srv, inside)["updated_at"] == before  # a move does not reorder the sidebar
    assert outside in _ids(srv.get_json("/api/sessions"))
    srv.post_json("/api/session/move", {"session_id": inside, "project_id": None})
    assert _view(srv, project["project_id"])["sessions"] == [] and _file(srv, inside)["project_id"] is None


def test_a_projects_view_comes_in_pages_newest_first(srv):
    project = _project(srv)
    sids = [_session(srv, f"Paged {i}") for i in range(5)]
    srv.post_json(
        "/api/sessions/bulk", {"action": "move", "session_ids": sids, "project_id": project["project_id"]}
    )
    first = _view(srv, project["project_id"], limit=2)
    second = _view(srv, project["project_id"], limit=2, cursor=first["next_cursor"])
    third = _view(srv, project["project_id"], limit=2, cursor=second["next_cursor"])
    assert first["total"] == 5 and third["next_cursor"] is None
    assert _ids(first) + _ids(second) + _ids(third) == list(reversed(sids))


@pytest.mark.parametrize("bad", ["../x", "%00", "a" * 65, "a%20b"])
def test_a_hostile_project_filter_is_a_400(srv, bad):
    code, data = srv.json("GET", f"/api/sessions?project_id={bad}")
    assert code == 400 and "project_id" in data["error"]


def test_deleting_a_project_moves_its_sessions_out_and_never_deletes_them(srv):
    project = _project(srv)
    sids = [_session(srv, f"Kept {i}") for i in range(3)]
    srv.post_json(
        "/api/sessions/bulk", {"action": "move", "session_ids": sids, "project_id": project["project_id"]}
    )
    done = srv.post_json("/api/projects/delete", {"project_id": project["project_id"]})
    assert sorted(done["moved"]) == sorted(sids)
    assert project["project_id"] not in {p["project_id"] for p in srv.get_json("/api/projects")["projects"]}
    for sid in sids:
        assert _file(srv, sid)["project_id"] is None and _file(srv, sid)["messages"]
    listed = set(_ids(srv.get_json("/api/sessions")))
    assert set(sids) <= listed


# ---------------------------------------------------------------------- bulk actions


def test_bulk_archive_and_unarchive_report_each_id(srv):
    sids = [_session(srv, f"Archive {i}") for i in range(3)]
    done = srv.post_json("/api/sessions/bulk", {"action": "archive", "session_ids": sids})
    assert done["ok"] and done["done"] == 3 and [r["session_id"] for r in done["results"]] == sids
    assert all(_file(srv, sid)["archived"] is True for sid in sids)
    srv.post_json("/api/sessions/bulk", {"action": "unarchive", "session_ids": sids})
    assert all(_file(srv, sid)["archived"] is False for sid in sids)


def test_bulk_delete_moves_sessions_to_the_trash_and_restore_brings_them_back(srv):
    sids = [_session(srv, f"Trash {i}") for i in range(3)]
    done = srv.post_json("/api/sessions/bulk", {"action": "delete", "session_ids": sids})
    assert done["done"] == 3
    assert not any((srv.session_dir / f"{sid}.json").exists() for sid in sids)
    assert not set(sids) & set(_ids(srv.get_json("/api/sessions")))
    tokens = [r["undo_token"] for r in done["results"]]
    back = srv.post_json("/api/sessions/bulk", {"action": "restore", "undo_tokens": tokens})
    assert back["done"] == 3 and [r["session"]["session_id"] for r in back["results"]] == sids
    assert set(sids) <= set(_ids(srv.get_json("/api/sessions")))
    assert all(_file(srv, sid)["messages"] for sid in sids)


def test_a_missing_session_in_a_bulk_action_is_reported_and_the_others_are_changed(srv):
    project = _project(srv)
    first, last = _session(srv, "Bulk first"), _session(srv, "Bulk last")
    body = {"action": "move", "session_ids": [first, "gone0000", last], "project_id": project["project_id"]}
    done = srv.post_json("/api/sessions/bulk", body)
    assert not done["ok"] and done["done"] == 2 and done["failed"] == 1
    assert done["results"][1] == {
        "session_id": "gone0000",
        "ok": False,
        "status": 404,
        "error": "Session not found",
    }
    assert _file(srv, first)["project_id"] == _file(srv, last)["project_id"] == project["project_id"]


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"action": "explode", "session_ids": ["a"]},
        {"action": "archive"},
        {"action": "archive", "session_ids": []},
        {"action": "archive", "session_ids": "abc"},
        {"action": "archive", "session_ids": [1, 2]},
        {"action": "archive", "session_ids": ["SID", "../../etc/passwd"]},
        {"action": "archive", "session_ids": ["_index"]},
        {"action": "archive", "session_ids": ["a"] * 1001},
        {"action": "move", "session_ids": ["a"], "project_id": "../p"},
        {"action": "restore", "undo_tokens": [3]},
    ],
)
def test_a_malformed_bulk_request_is_a_400_and_changes_nothing(srv, body):
    sid = _session(srv, "Untouched")
    before = (srv.session_dir / f"{sid}.json").read_bytes()
    if isinstance(body.get("session_ids"), list):  # a good id beside the bad ones is not changed either
        body = {**body, "session_ids": [sid if item == "SID" else item for item in body["session_ids"]]}
    code, data = srv.json("POST", "/api/sessions/bulk", body)
    assert code == 400 and data["error"]
    assert (srv.session_dir / f"{sid}.json").read_bytes() == before


# ---------------------------------------------------------------------- a damaged projects.json


def test_a_damaged_projects_json_is_a_clear_error_and_is_never_written_over(srv):
    path = _projects_file(srv)
    kept = path.read_bytes() if path.exists() else None
    damaged = b'[{"project_id": "abc", "name": "Half'
    path.write_bytes(damaged)
    try:
        code, data = srv.json("GET", "/api/projects")
        assert code == 500 and "projects.json" in data["error"] and "damaged" in data["error"]
        code, data = srv.json("POST", "/api/projects/create", {"name": "New one"})
        assert code == 500 and path.read_bytes() == damaged
        assert srv.get_json("/api/sessions")["sessions"]  # the sidebar goes on working
        assert "not a JSON list" in srv.log_text()
    finally:
        path.write_bytes(kept) if kept is not None else path.unlink()


def test_an_unreadable_entry_is_skipped_in_the_list_and_kept_in_the_file(srv):
    path = _projects_file(srv)
    kept = path.read_bytes() if path.exists() else b"[]"
    odd = [{"name": "no id"}, "a string", {"project_id": "../bad", "name": "bad id"}]
    path.write_text(json.dumps([*json.loads(kept), *odd, {"project_id": "p1", "name": "Fine", "color": RED,
                                                           "created_at": 1.0, "future_key": [1, 2]}]))  # fmt: skip
    try:
        listed = srv.get_json("/api/projects")["projects"]
        assert "p1" in {p["project_id"] for p in listed} and "../bad" not in {p["project_id"] for p in listed}
        srv.post_json("/api/projects/rename", {"project_id": "p1", "name": "Still fine"})
        stored = json.loads(path.read_text())
        assert all(item in stored for item in odd)
        assert next(e for e in stored if isinstance(e, dict) and e.get("project_id") == "p1")[
            "future_key"
        ] == [1, 2]
        assert "skipped" in srv.log_text()
    finally:
        path.write_bytes(kept)

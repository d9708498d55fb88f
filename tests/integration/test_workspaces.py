"""Workspaces end to end: the real server with ``workspace_roots`` set to one folder (the home folder lies
outside it). New and imported sessions start inside the roots, and every turn checks its workspace again."""

from __future__ import annotations

import pytest

from talaria_testing.chat_client import on_disk, read_all, session, text_of
from talaria_testing.fake_llm import Reply, agent_server

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def srv(tmp_path_factory, llm):
    root = tmp_path_factory.mktemp("workspaces")
    (root / "roots").mkdir()
    with agent_server(root, llm.base_url, env={"TALARIA_WORKSPACE_ROOTS": str(root / "roots")}) as server:
        yield server


def _roots(srv) -> str:
    return str((srv.root / "roots").resolve())


def test_a_new_session_starts_inside_the_roots_when_home_is_outside_them(srv):
    """The default was the home folder even when the roots leave it out: the session's terminal ran there."""
    row = srv.post_json("/api/session/new", {})["session"]
    assert row["workspace"] == _roots(srv)
    assert srv.get_json("/api/workspaces")["default"] == _roots(srv)


def test_an_imported_session_starts_inside_the_roots(srv):
    """An imported session got $HOME as its workspace, outside the roots (its uploads landed there)."""
    exported = {"title": "From elsewhere", "messages": [{"role": "user", "content": "hi", "timestamp": 1.0}]}
    row = srv.post_json("/api/session/import", exported)["session"]
    assert row["workspace"] == _roots(srv)
    assert on_disk(srv, row["session_id"])["workspace"] == _roots(srv)


def test_a_workspace_replaced_by_a_link_out_of_the_roots_refuses_the_next_turn(srv, fake):
    """A folder chosen inside the roots and then replaced by a link to a folder outside them was followed
    at the next turn: the agent's tools ran outside the roots. The turn is refused (409, a message the page
    shows) and nothing is saved; a folder inside the roots again lets the turn run."""
    chosen, outside = srv.root / "roots" / "project", srv.root / "outside"
    chosen.mkdir()
    outside.mkdir()
    sid = srv.post_json("/api/session/new", {"workspace": str(chosen)})["session"]["session_id"]
    before = on_disk(srv, sid)
    chosen.rmdir()
    chosen.symlink_to(outside, target_is_directory=True)
    status, answer = srv.json("POST", "/api/chat/start", {"session_id": sid, "message": "list my files"})
    assert status == 409 and "outside the allowed workspace roots" in answer["error"]
    assert on_disk(srv, sid) == before
    assert session(srv, sid)["messages"] == [] and fake.chat_requests() == []
    chosen.unlink()
    chosen.mkdir()
    fake.script(Reply(text="Nothing here yet."))
    started = srv.post_json("/api/chat/start", {"session_id": sid, "message": "list my files"})
    assert text_of(read_all(srv, started["stream_id"])) == "Nothing here yet."

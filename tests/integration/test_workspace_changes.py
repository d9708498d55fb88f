"""What the agent changed, from its own checkpoints, through the real server and agent: turns that write
and edit files with the agent's file tools (driven by the fake LLM) leave checkpoints; a checkpoint's diff
shows the change since; a restore puts the files back, and restoring the snapshot it took undoes it."""

from __future__ import annotations

import pytest

from talaria_testing.chat_client import chat, new_session
from talaria_testing.fake_llm import Reply, file_agent_server

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def srv(llm, tmp_path_factory):
    root = tmp_path_factory.mktemp("changes")
    with file_agent_server(root, llm.base_url) as server:
        yield server


def _write(path: str, content: str) -> Reply:
    return Reply(tool_calls=[{"name": "write_file", "arguments": {"path": path, "content": content}}])


def test_a_turns_changes_are_listed_diffed_restored_and_the_restore_undone(srv, llm):
    sid = new_session(srv)
    (srv.workspace / "README.md").write_text(
        "a project\n"
    )  # the agent takes no checkpoint of an empty folder
    notes = srv.workspace / "notes.txt"
    llm.script(_write("notes.txt", "first draft\n"), Reply(text="Written."))
    chat(srv, sid, "write the notes")
    llm.script(_write("notes.txt", "second draft\n"), Reply(text="Rewritten."))
    chat(srv, sid, "rewrite the notes")
    assert notes.read_text() == "second draft\n"

    listed = srv.get_json(f"/api/rollback/list?session_id={sid}")["checkpoints"]
    assert [row["reason"] for row in listed] == ["before write_file", "before write_file"]  # one per turn
    before_second = listed[0]["hash"]
    change = srv.get_json(f"/api/rollback/diff?session_id={sid}&hash={before_second}")
    assert (
        "-first draft" in change["diff"]
        and "+second draft" in change["diff"]
        and "notes.txt" in change["stat"]
    )

    restored = srv.post_json("/api/rollback/restore", {"session_id": sid, "hash": before_second})
    assert notes.read_text() == "first draft\n" and restored["undo_hash"]
    srv.post_json("/api/rollback/restore", {"session_id": sid, "hash": restored["undo_hash"]})
    assert notes.read_text() == "second draft\n"


def test_one_file_is_restored_alone(srv, llm):
    sid = new_session(srv)
    llm.script(_write("a.txt", "a1\n"), _write("b.txt", "b1\n"), Reply(text="Both."))
    chat(srv, sid, "write both")
    llm.script(_write("a.txt", "a2\n"), _write("b.txt", "b2\n"), Reply(text="Both again."))
    chat(srv, sid, "change both")
    # The agent checkpoints before each round of tool calls: the second newest is from before "a2".
    listed = srv.get_json(f"/api/rollback/list?session_id={sid}")["checkpoints"]
    before_a2 = listed[1]["hash"]
    srv.post_json("/api/rollback/restore", {"session_id": sid, "hash": before_a2, "path": "a.txt"})
    assert (srv.workspace / "a.txt").read_text() == "a1\n" and (srv.workspace / "b.txt").read_text() == "b2\n"


@pytest.mark.parametrize("bad", ["zz", "../HEAD", "a" * 65, ""])
def test_a_bad_checkpoint_name_or_path_is_refused(srv, bad):
    sid = new_session(srv)
    status, answer = srv.json("GET", f"/api/rollback/diff?session_id={sid}&hash={bad}")
    assert status == 400 and answer["error"]
    status, answer = srv.json(
        "POST", "/api/rollback/restore", {"session_id": sid, "hash": "abcd1234", "path": "../x"}
    )
    assert status in (400, 403)

"""Each turn's changes through the real server and agent (its file tools driven by the fake LLM): the files
a turn wrote and edited, listed per turn from the agent's own checkpoints (a subfolder the agent
checkpoints on its own included), one file's diff, a restore of the whole turn that puts its files back
and leaves other turns' alone, and the undo of that restore; bad input refused cleanly."""

from __future__ import annotations

import time
from urllib.parse import quote

import pytest

from talaria_testing.chat_client import chat, new_session, read_all, session, start
from talaria_testing.fake_llm import Reply, agent_server, file_agent_server

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def srv(llm, tmp_path_factory):
    root = tmp_path_factory.mktemp("turn-changes")
    with file_agent_server(root, llm.base_url) as server:
        yield server


def _call(name: str, **arguments) -> dict:
    return {"name": name, "arguments": arguments}


def _next_second() -> None:
    # Git dates checkpoints to the second: a turn sent within the second of the last one's checkpoint could
    # not be told from it, which a person typing never does and a script must not either.
    time.sleep(1 - time.time() % 1 + 0.01)


def _user_rows(srv, sid: str) -> list[int]:
    return [row["_idx"] for row in session(srv, sid)["messages"] if row["role"] == "user"]


def _one_write(srv, llm, path: str, content: str) -> tuple[str, int]:
    """A new session whose one turn writes ``path``; the session and the turn."""
    sid = new_session(srv)
    (srv.workspace / "README.md").write_text(
        "a project\n"
    )  # the agent takes no checkpoint of an empty folder
    llm.script(Reply(tool_calls=[_call("write_file", path=path, content=content)]), Reply(text="Done."))
    chat(srv, sid, f"write {path}")
    (turn,) = _user_rows(srv, sid)
    return sid, turn


def test_a_turns_files_are_listed_diffed_restored_and_the_restore_undone(srv, llm):
    sid = new_session(srv)
    space = srv.workspace
    (space / "README.md").write_text("a project\n")
    (space / "notes.txt").write_text("first line\nkeep\n")
    (space / "src").mkdir()
    (space / "src" / "app.py").write_text("print(0)\n")
    llm.script(
        Reply(tool_calls=[_call("write_file", path="src/app.py", content="print(1)\n")]),
        Reply(text="Started."),
    )
    chat(srv, sid, "start the app")
    _next_second()
    llm.script(
        Reply(
            tool_calls=[
                _call("patch", path="notes.txt", old_string="first line", new_string="second line"),
                _call("write_file", path="new.txt", content="brand new\n"),
            ]
        ),
        Reply(tool_calls=[_call("write_file", path="src/app.py", content="print(2)\n")]),
        Reply(text="Edited."),
    )
    chat(srv, sid, "edit the notes")
    first, second = _user_rows(srv, sid)

    turns = srv.get_json(f"/api/rollback/turns?session_id={sid}")["turns"]
    assert turns == [
        {"turn": first, "files_changed": 1, "insertions": 1, "deletions": 1},
        {"turn": second, "files_changed": 3, "insertions": 3, "deletions": 2},
    ]
    listed = srv.get_json(f"/api/rollback/turn?session_id={sid}&turn={second}")
    assert listed["files"] == [
        {"path": "new.txt", "status": "added", "insertions": 1, "deletions": 0, "binary": False},
        {"path": "notes.txt", "status": "modified", "insertions": 1, "deletions": 1, "binary": False},
        {"path": "src/app.py", "status": "modified", "insertions": 1, "deletions": 1, "binary": False},
    ]
    assert not listed["truncated"]
    diff = srv.get_json(f"/api/rollback/turn/diff?session_id={sid}&turn={second}&path=notes.txt")
    assert "-first line" in diff["diff"] and "+second line" in diff["diff"] and not diff["truncated"]

    restored = srv.post_json("/api/rollback/turn/restore", {"session_id": sid, "turn": second})
    assert restored["restored"] == 3 and restored["undo"]
    assert (space / "notes.txt").read_text() == "first line\nkeep\n"
    assert not (space / "new.txt").exists()
    assert (
        space / "src" / "app.py"
    ).read_text() == "print(1)\n"  # the first turn's file, as that turn left it
    again = srv.get_json(f"/api/rollback/turn?session_id={sid}&turn={second}")
    assert [row["path"] for row in again["files"]] == ["new.txt", "notes.txt", "src/app.py"]

    undone = srv.post_json(
        "/api/rollback/turn/undo", {"session_id": sid, "turn": second, "undo": restored["undo"]}
    )
    assert undone["restored"] == 3
    assert (space / "notes.txt").read_text() == "second line\nkeep\n"
    assert (space / "new.txt").read_text() == "brand new\n"
    assert (space / "src" / "app.py").read_text() == "print(2)\n"


def test_bad_turns_paths_and_undo_lists_are_refused(srv, llm):
    sid, turn = _one_write(srv, llm, "x.txt", "x\n")
    for bad in ("x", "-1", "1e3", ""):
        status, answer = srv.json("GET", f"/api/rollback/turn?session_id={sid}&turn={quote(bad)}")
        assert status == 400 and answer["error"]
    assert srv.json("GET", f"/api/rollback/turn?session_id={sid}&turn=999")[0] == 404
    for path in ("../x.txt", "/etc/passwd"):
        status, answer = srv.json(
            "GET", f"/api/rollback/turn/diff?session_id={sid}&turn={turn}&path={quote(path)}"
        )
        assert status in (400, 403) and answer["error"]
    assert srv.json("GET", f"/api/rollback/turn/diff?session_id={sid}&turn={turn}&path=README.md")[0] == 404
    for undo in (
        None,
        "abc",
        [],
        [{"folder": "", "hash": "../HEAD"}],
        [{"folder": "elsewhere", "hash": "abcd"}],
    ):
        status, answer = srv.json(
            "POST", "/api/rollback/turn/undo", {"session_id": sid, "turn": turn, "undo": undo}
        )
        assert status in (400, 404) and answer["error"]
    assert (srv.workspace / "x.txt").read_text() == "x\n"


def test_a_long_diff_is_cut_at_its_line_limit_and_says_so(srv, llm):
    sid = new_session(srv)
    (srv.workspace / "README.md").write_text("a project\n")
    (srv.workspace / "long.txt").write_text("")
    body = "".join(f"line {i}\n" for i in range(5_000))
    llm.script(Reply(tool_calls=[_call("write_file", path="long.txt", content=body)]), Reply(text="Long."))
    chat(srv, sid, "make it long")
    (turn,) = _user_rows(srv, sid)
    diff = srv.get_json(f"/api/rollback/turn/diff?session_id={sid}&turn={turn}&path=long.txt")
    assert diff["truncated"] and diff["max_lines"] == 3_000 and diff["lines"] > 5_000
    assert len(diff["diff"].split("\n")) == 3_000 and "+line 0" in diff["diff"]


def test_a_turn_is_not_restored_while_one_runs_in_the_session(srv, llm):
    sid, turn = _one_write(srv, llm, "y.txt", "y\n")
    _next_second()
    llm.script(Reply(text="Thinking for a long time.", hang_after=1))
    stream = start(srv, sid, "think")
    try:
        assert llm.wait_for_hang()
        status, answer = srv.json("POST", "/api/rollback/turn/restore", {"session_id": sid, "turn": turn})
        assert status == 409 and "running" in answer["error"]
        assert (srv.workspace / "y.txt").read_text() == "y\n"
    finally:
        srv.post_json("/api/chat/cancel", {"stream_id": stream})
        read_all(srv, stream)


def test_past_the_agents_checkpoint_limit_no_turn_is_given_another_turns_changes(llm, tmp_path):
    # Past max_snapshots the agent rebuilds a folder's history, every checkpoint then dated at the rebuild.
    extra = {"checkpoints": {"max_snapshots": 2}}
    with file_agent_server(tmp_path, llm.base_url, extra=extra) as small:
        sid = new_session(small)
        (small.workspace / "README.md").write_text("a project\n")
        for version in ("v1", "v2", "v3"):
            llm.script(
                Reply(tool_calls=[_call("write_file", path="a.txt", content=f"{version}\n")]),
                Reply(text="Ok."),
            )
            chat(small, sid, f"write {version}")
            _next_second()
        *_earlier, last = _user_rows(small, sid)
        assert [row["turn"] for row in small.get_json(f"/api/rollback/turns?session_id={sid}")["turns"]] == [
            last
        ]
        diff = small.get_json(f"/api/rollback/turn/diff?session_id={sid}&turn={last}&path=a.txt")["diff"]
        assert "-v2" in diff and "+v3" in diff and "v1" not in diff
        # The snapshot before a restore makes the agent rebuild the history again and collect the old commits:
        # the restore reads the turn's tree, which the rebuilt history keeps (it was a 500 "git failed").
        small.post_json("/api/rollback/turn/restore", {"session_id": sid, "turn": last})
        assert (small.workspace / "a.txt").read_text() == "v2\n"


def test_a_session_in_another_folder_than_the_servers_finds_the_turns_of_relative_paths_and_commands(
    llm, tmp_path
):
    """The agent resolves a relative path, and the folder of a command that names none, against the worker
    process's own folder: a session whose workspace is another folder had its checkpoints taken of the
    server's, so its turns listed nothing and could not be restored."""
    with agent_server(
        tmp_path, llm.base_url, toolsets="file,terminal", env={"TALARIA_WORKSPACE_ROOTS": str(tmp_path)}
    ) as srv:
        _in_another_folder(srv, llm)


def _in_another_folder(srv, llm) -> None:
    other = srv.root / "elsewhere"
    (other / "docs").mkdir(parents=True)
    (other / "docs" / "guide.md").write_text("# guide\n")
    (other / "old.txt").write_text("old\n")
    sid = new_session(srv)
    srv.post_json("/api/session/workspace", {"session_id": sid, "workspace": str(other)})
    srv.post_json("/api/approval/yolo", {"session_id": sid, "enabled": True})
    _next_second()
    llm.script(
        Reply(tool_calls=[_call("write_file", path="docs/guide.md", content="# the guide\n")]),
        Reply(tool_calls=[_call("terminal", command="rm -f old.txt")]),
        Reply(text="Done."),
    )
    chat(srv, sid, "rewrite the guide and remove the old file")
    (turn,) = _user_rows(srv, sid)
    files = srv.get_json(f"/api/rollback/turn?session_id={sid}&turn={turn}")["files"]
    assert [(f["path"], f["status"]) for f in files] == [
        ("docs/guide.md", "modified"),
        ("old.txt", "deleted"),
    ]
    srv.post_json("/api/rollback/turn/restore", {"session_id": sid, "turn": turn})
    assert (other / "docs" / "guide.md").read_text() == "# guide\n" and (
        other / "old.txt"
    ).read_text() == "old\n"
    assert not (srv.workspace / "docs").exists()

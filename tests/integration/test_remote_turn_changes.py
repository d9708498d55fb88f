"""Each turn's changes in a session on another host (``api.services.remote_checkpoints``,
``api.agent.host_checkpoints``): a real OpenSSH server on 127.0.0.1, the agent's file and terminal tools run
there by the fake LLM's script. The environment's worker snapshots the workspace on the host before each
round that changes files, in a store kept there (none on this machine); the changes view lists each turn's
files and diffs from it, restores a turn (its new files removed, other turns' left alone) and undoes the
restore; bad input is refused cleanly. (A host that is down answers what to fix through the same command
path as the files panel: ``tests/integration/test_environment_shell.py``.)"""

from __future__ import annotations

import json
import time
from pathlib import Path
from urllib.parse import quote

import pytest

from talaria_testing import sshd
from talaria_testing.chat_client import chat, session, text_of
from talaria_testing.fake_llm import Reply
from talaria_testing.server_proc import ServerProc
from tests.integration import test_environment_workers as environment_tests

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(bool(sshd.available()), reason=sshd.available() or "ok"),
]
ssh = environment_tests.ssh
srv = environment_tests.srv


def _call(name: str, **arguments) -> dict:
    return {"id": f"{name}-{time.monotonic_ns()}", "name": name, "arguments": arguments}


def _next_second() -> None:
    # Checkpoints are dated to the second: a turn sent within the second of the last one's checkpoint could
    # not be told from it, which a person typing never does and a script must not either.
    time.sleep(1 - time.time() % 1 + 0.01)


def _get(srv: ServerProc, route: str, **query) -> tuple[int, dict]:
    params = "&".join(f"{k}={quote(str(v))}" for k, v in query.items())
    status, _, raw = srv.request("GET", f"{route}?{params}")
    return status, json.loads(raw)


def _user_rows(srv: ServerProc, sid: str) -> list[int]:
    return [row["_idx"] for row in session(srv, sid)["messages"] if row["role"] == "user"]


def _project(ssh: sshd.SshServer, name: str) -> Path:
    folder = ssh.remote_home / name
    (folder / "src").mkdir(parents=True)
    (folder / "src" / "app.py").write_text("print(0)\n")
    (folder / "notes.txt").write_text("first line\nkeep\n")
    return folder


def _remote_session(srv: ServerProc, folder: str) -> str:
    sid = environment_tests._remote_session(srv)
    srv.post_json("/api/session/workspace", {"session_id": sid, "workspace": folder})
    return sid


def _turn(srv: ServerProc, fake, sid: str, message: str, *calls: dict) -> None:
    _next_second()
    fake.script(*(Reply(tool_calls=[call]) for call in calls), Reply(text="Done."))
    assert text_of(chat(srv, sid, message)).endswith("Done.")


def test_a_remote_turns_files_are_listed_diffed_restored_and_the_restore_undone_on_the_host(srv, fake, ssh):
    folder = _project(ssh, "changes")
    sid = _remote_session(srv, "~/changes")
    _turn(
        srv, fake, sid, "change the app and add a plan",
        _call("write_file", path="src/app.py", content="print(1)\n"),
        _call("write_file", path="plans/today/plan.md", content="# plan\n"),
    )  # fmt: skip
    _turn(
        srv,
        fake,
        sid,
        "edit the notes",
        _call("patch", path="notes.txt", old_string="keep", new_string="kept"),
    )
    first, second = _user_rows(srv, sid)
    assert (folder / "src" / "app.py").read_text() == "print(1)\n"

    # The store is on the host, under the login's data folder; this machine's agent store has nothing.
    store = ssh.remote_home / ".local" / "share" / "talaria" / "checkpoints" / "store"
    assert (store / "HEAD").is_file() and list((store / "refs" / "talaria").iterdir())
    assert not (srv.hermes_home / "checkpoints" / "store" / "projects").exists()
    assert not (folder / ".git").exists()  # the workspace itself is not made a repository

    status, listed = _get(srv, "/api/rollback/turns", session_id=sid)
    assert status == 200, listed
    assert listed["turns"] == [
        {"turn": first, "files_changed": 2, "insertions": 2, "deletions": 1},
        {"turn": second, "files_changed": 1, "insertions": 1, "deletions": 1},
    ]
    status, files = _get(srv, "/api/rollback/turn", session_id=sid, turn=first)
    assert status == 200, files
    assert [(f["path"], f["status"]) for f in files["files"]] == [
        ("plans/today/plan.md", "added"),
        ("src/app.py", "modified"),
    ]
    status, diff = _get(srv, "/api/rollback/turn/diff", session_id=sid, turn=first, path="src/app.py")
    assert status == 200, diff
    assert "-print(0)\n+print(1)" in diff["diff"] and diff["truncated"] is False

    # A person's own edit on the host after the turns is left alone.
    (folder / "mine.txt").write_text("by hand\n")
    restored = srv.post_json("/api/rollback/turn/restore", {"session_id": sid, "turn": first})
    assert restored["restored"] == 2 and restored["undo"][0]["folder"] == ""
    assert (folder / "src" / "app.py").read_text() == "print(0)\n"
    assert not (folder / "plans").exists()  # the file it added, and the folders that left empty
    assert (folder / "notes.txt").read_text() == "first line\nkept\n"  # the second turn's change stays
    assert (folder / "mine.txt").read_text() == "by hand\n"
    # The restore is no turn's change: the restored turn still reads the same.
    assert _get(srv, "/api/rollback/turns", session_id=sid)[1]["turns"][0] == listed["turns"][0]

    srv.post_json("/api/rollback/turn/undo", {"session_id": sid, "turn": first, "undo": restored["undo"]})
    assert (folder / "src" / "app.py").read_text() == "print(1)\n"
    assert (folder / "plans" / "today" / "plan.md").read_text() == "# plan\n"
    assert (folder / "mine.txt").read_text() == "by hand\n"


def test_a_remote_turn_that_makes_the_first_files_of_an_empty_folder_is_listed_and_restored(srv, fake, ssh):
    """The agent takes no checkpoint of an empty folder, so a turn that makes its first files had no state
    before it; the host's store takes one."""
    folder = ssh.remote_home / "empty"
    folder.mkdir()
    sid = _remote_session(srv, str(Path(ssh.home) / "empty"))
    _turn(srv, fake, sid, "start the project", _call("write_file", path="README.md", content="# new\n"))
    (turn,) = _user_rows(srv, sid)
    assert _get(srv, "/api/rollback/turn", session_id=sid, turn=turn)[1]["files"][0]["status"] == "added"
    srv.post_json("/api/rollback/turn/restore", {"session_id": sid, "turn": turn})
    assert list(folder.iterdir()) == []


def test_a_destructive_command_there_is_checkpointed_first_and_its_deletion_restored(srv, fake, ssh):
    folder = _project(ssh, "removal")
    sid = _remote_session(srv, "~/removal")
    srv.post_json("/api/approval/yolo", {"session_id": sid, "enabled": True})
    _turn(srv, fake, sid, "clean up", _call("terminal", command="rm -rf src"))
    assert not (folder / "src").exists()
    (turn,) = _user_rows(srv, sid)
    files = _get(srv, "/api/rollback/turn", session_id=sid, turn=turn)[1]["files"]
    assert files == [
        {"path": "src/app.py", "status": "deleted", "insertions": 0, "deletions": 1, "binary": False}
    ]
    srv.post_json("/api/rollback/turn/restore", {"session_id": sid, "turn": turn})
    assert (folder / "src" / "app.py").read_text() == "print(0)\n"


def test_bad_turns_paths_and_undo_lists_are_refused_for_a_remote_session(srv, fake, ssh):
    _project(ssh, "refusals")
    sid = _remote_session(srv, "~/refusals")
    _turn(srv, fake, sid, "edit", _call("write_file", path="src/app.py", content="print(2)\n"))
    (turn,) = _user_rows(srv, sid)
    cases = [
        (("GET", "/api/rollback/turn", {"turn": "x"}), 400),
        (("GET", "/api/rollback/turn", {"turn": turn + 1}), 404),
        (("GET", "/api/rollback/turn/diff", {"turn": turn, "path": "../etc/passwd"}), 403),
        (("GET", "/api/rollback/turn/diff", {"turn": turn, "path": "/etc/passwd"}), 403),
        (("GET", "/api/rollback/turn/diff", {"turn": turn, "path": "notes.txt"}), 404),
        (("POST", "/api/rollback/turn/undo", {"turn": turn, "undo": [{"folder": "", "hash": "zz;rm"}]}), 400),
        (
            ("POST", "/api/rollback/turn/undo", {"turn": turn, "undo": [{"folder": "", "hash": "ab" * 20}]}),
            404,
        ),
        (("POST", "/api/rollback/turn/undo", {"turn": turn, "undo": "all"}), 400),
    ]
    for (method, route, fields), expected in cases:
        if method == "GET":
            status, data = _get(srv, route, session_id=sid, **fields)
        else:
            status, data = srv.json("POST", route, {"session_id": sid, **fields})
        assert status == expected, (route, fields, data)
        assert isinstance(data.get("error"), str) and data["error"]


def test_the_checkpoint_list_of_a_remote_session_reads_diffs_and_restores_on_the_host(srv, fake, ssh):
    """hermes-webui's list of checkpoints (``/api/rollback/list|diff|restore``) answers for the host's store in
    the shapes the agent's list answers for a local folder."""
    folder = _project(ssh, "listed")
    sid = _remote_session(srv, "~/listed")
    assert _get(srv, "/api/rollback/list", session_id=sid) == (
        200,
        {"workspace": f"{ssh.home}/listed", "checkpoints": []},
    )  # no checkpoint of this folder yet
    _turn(srv, fake, sid, "edit", _call("write_file", path="src/app.py", content="print(5)\n"))
    _turn(srv, fake, sid, "add", _call("write_file", path="extra.txt", content="more\n"))
    status, listed = _get(srv, "/api/rollback/list", session_id=sid)
    assert status == 200, listed
    newest, oldest = listed["checkpoints"]
    assert listed["workspace"] == f"{ssh.home}/listed"
    assert (oldest["reason"], oldest["files_changed"]) == ("before write_file", 0)
    assert (newest["files_changed"], newest["insertions"], newest["deletions"]) == (1, 1, 1)
    assert newest["short_hash"] == newest["hash"][:7] and newest["timestamp"].endswith("+00:00")

    status, diff = _get(srv, "/api/rollback/diff", session_id=sid, hash=oldest["hash"])
    assert status == 200, diff
    assert "-print(0)" in diff["diff"] and "+more" in diff["diff"] and "2 files changed" in diff["stat"]

    one = srv.post_json(
        "/api/rollback/restore", {"session_id": sid, "hash": oldest["hash"], "path": "src/app.py"}
    )
    assert (folder / "src" / "app.py").read_text() == "print(0)\n" and (folder / "extra.txt").exists()
    whole = srv.post_json("/api/rollback/restore", {"session_id": sid, "hash": oldest["hash"]})
    assert not (folder / "extra.txt").exists()
    srv.post_json("/api/rollback/restore", {"session_id": sid, "hash": whole["undo_hash"]})
    assert (folder / "extra.txt").read_text() == "more\n" and (
        folder / "src" / "app.py"
    ).read_text() == "print(0)\n"
    srv.post_json("/api/rollback/restore", {"session_id": sid, "hash": one["undo_hash"]})
    assert (folder / "src" / "app.py").read_text() == "print(5)\n"

    for fields, expected in (({"hash": "ab" * 20}, 404), ({"hash": "x;y"}, 400)):
        assert srv.json("POST", "/api/rollback/restore", {"session_id": sid, **fields})[0] == expected
    assert (
        srv.json(
            "POST", "/api/rollback/restore", {"session_id": sid, "hash": oldest["hash"], "path": "../x"}
        )[0]
        == 403
    )

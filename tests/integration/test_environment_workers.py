"""Turns in an execution environment (``api.services.environment_workers``): a session on a real OpenSSH server on
127.0.0.1 runs the agent's terminal and file tools there, in a worker process of its own, while a session on
``local`` runs at the same time and stays on this machine; approvals ask the same way there; a host that is
unreachable or stops mid-turn ends the turn with what to fix, and the next turn works once it is back.
The only fake is the LLM."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

import pytest

from talaria_testing import sshd
from talaria_testing.chat_client import chat, named, names, new_session, on_disk, start, text_of
from talaria_testing.fake_llm import Reply, agent_server
from talaria_testing.server_proc import ServerProc
from tests.integration.test_approvals import Stream, respond, terminal_call
from tests.integration.test_worker_pool import worker_pids

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(bool(sshd.available()), reason=sshd.available() or "ok"),
]


def held(flag) -> str:
    """A command that waits until the test creates ``flag`` (a path both sides see), then says where it ran."""
    return f"while [ ! -e {flag} ]; do sleep 0.1; done; {WHERE}"


WHERE = 'printf "conn=[%s] host=[%s] pid=[%s]\\n" "$SSH_CONNECTION" "$(hostname)" "$$"'


def _server(root: Path, base_url: str, ssh: sshd.SshServer, **env: str) -> ServerProc:
    settings = {
        "TALARIA_WORKSPACE_ROOTS": str(root),
        "TALARIA_CHECKPOINT_INTERVAL": "0.2",
        "PATH": f"{ssh.client_path}{os.pathsep}{os.environ.get('PATH', '')}",
        **env,
    }
    manual = {"approvals": {"mode": "manual"}}
    return agent_server(root, base_url, toolsets="terminal,file", env=settings, extra=manual)


@pytest.fixture(scope="module")
def ssh(tmp_path_factory):
    with sshd.SshServer(tmp_path_factory.mktemp("sshd")) as server:
        yield server


@pytest.fixture
def srv(llm, ssh, tmp_path):
    """A server per test: stopping it stops its environment workers and their SSH master connection."""
    with _server(tmp_path, llm.base_url, ssh) as server:
        server.post_json("/api/environments", ssh.definition("box"))
        server.post_json("/api/environments/confirm", {"name": "box"})
        yield server


def _remote_session(srv: ServerProc, name: str = "box") -> str:
    sid = new_session(srv)
    srv.post_json("/api/session/environment", {"session_id": sid, "environment": name})
    return sid


def _tool_outputs(srv: ServerProc, sid: str) -> list[str]:
    return [str(m.get("content") or "") for m in on_disk(srv, sid)["messages"] if m.get("role") == "tool"]


def test_a_remote_sessions_terminal_and_file_tools_run_on_the_ssh_host_while_a_local_session_stays_local(
    srv, fake, ssh
):
    remote, local = _remote_session(srv), new_session(srv)
    written = {
        "id": "w1",
        "name": "write_file",
        "arguments": {"path": "from_agent.txt", "content": "hi there"},
    }
    fake.script(
        Reply(tool_calls=[{"id": "r1", "name": "terminal", "arguments": {"command": held(ssh.root / "go1")}}])
    )
    remote_stream = Stream(srv, start(srv, remote, "where are you, remote?"))
    remote_stream.wait_for("tool")
    fake.script(
        Reply(tool_calls=[{"id": "l1", "name": "terminal", "arguments": {"command": WHERE}}],
              for_user="where are you, local?")
    )  # fmt: skip
    local_stream = Stream(srv, start(srv, local, "where are you, local?"))
    local_stream.wait_for("tool_complete")
    # Both ran at once, each in a worker process: the local one in the server's pool, the remote one in its
    # environment's.
    assert not named(remote_stream.events, "tool_complete")
    assert len(worker_pids(srv)) == 2
    (ssh.root / "go1").touch()
    remote_stream.finish()
    local_stream.finish()
    (remote_out,) = [o for o in _tool_outputs(srv, remote) if "conn=" in o]
    (local_out,) = [o for o in _tool_outputs(srv, local) if "conn=" in o]
    assert f"127.0.0.1 {ssh.port}" in remote_out  # SSH_CONNECTION names the server's side of the connection
    assert "conn=[]" in local_out

    fake.script(Reply(tool_calls=[written]), Reply(text="Written."))
    assert text_of(chat(srv, remote, "write the file")).endswith("Written.")
    assert (ssh.remote_home / "from_agent.txt").read_text() == "hi there"
    assert not (srv.root / "from_agent.txt").exists()
    assert not any(p.name == "from_agent.txt" for p in srv.root.rglob("from_agent.txt"))


def _saved_error(srv: ServerProc, sid: str) -> str:
    return " ".join(str(m.get("content") or "") for m in on_disk(srv, sid)["messages"][-2:])


def test_the_ssh_server_stopped_mid_command_ends_the_turn_with_what_to_fix_and_the_next_turn_works(
    llm, fake, tmp_path
):
    with sshd.SshServer(tmp_path / "sshd") as ssh, _server(tmp_path / "srv", llm.base_url, ssh) as srv:
        srv.post_json("/api/environments", ssh.definition("box"))
        srv.post_json("/api/environments/confirm", {"name": "box"})
        sid = _remote_session(srv)
        begun = ssh.root / "begun"
        fake.script(terminal_call(f"echo started; touch {begun}; sleep 4; echo finished"))
        stream = Stream(srv, start(srv, sid, "run the long one"))
        stream.wait_for("tool")
        deadline = time.monotonic() + 30
        while not begun.exists() and time.monotonic() < deadline:  # the command runs on the host
            time.sleep(0.05)
        assert begun.exists()
        ssh.drop()
        events = stream.finish()
        (error,) = named(events, "error")
        where = f"{ssh.user}@127.0.0.1 port {ssh.port}"
        assert "'box'" in error["message"] and f"Nothing answered SSH at {where}" in error["message"]
        assert names(events)[-1] == "done"
        saved = on_disk(srv, sid)
        assert saved["active_stream_id"] is None
        assert saved["messages"][0]["content"] == "run the long one"  # the user's message is kept
        assert "started" in _tool_outputs(srv, sid)[-1]  # what the command printed before the drop is kept
        assert f"Nothing answered SSH at {where}" in _saved_error(srv, sid)

        # Down before the next turn: it ends at once with the same advice, the message kept.
        events = chat(srv, sid, "are you there?")
        assert f"Nothing answered SSH at {where}" in named(events, "error")[0]["message"]
        assert any(m.get("content") == "are you there?" for m in on_disk(srv, sid)["messages"])

        ssh.start()
        fake.script(terminal_call(WHERE), Reply(text="Back."))
        events = chat(srv, sid, "again")
        assert not named(events, "error") and text_of(events).endswith("Back.")
        assert f"127.0.0.1 {ssh.port}" in _tool_outputs(srv, sid)[-1]


def test_a_refused_key_ends_the_turn_naming_the_key_to_add_and_the_turn_after_the_fix_runs_there(
    srv, fake, ssh
):
    """A key the host refuses (the environment changed to it after the session chose it): the turn ends with which login refused it and what to add, the person's message
    kept and nothing run; once the environment names an accepted key, the next turn runs on the host."""
    sid = _remote_session(srv)  # chosen while the key was accepted
    srv.post_json("/api/environments", ssh.definition("box", key=ssh.refused_key))
    srv.post_json("/api/environments/confirm", {"name": "box"})
    other = new_session(srv)
    status, data = srv.json("POST", "/api/session/environment", {"session_id": other, "environment": "box"})
    assert status == 400 and "refused the key" in data["error"]  # choosing it checks the folder there
    fake.script(terminal_call(WHERE), Reply(text="Ran."))
    events = chat(srv, sid, "where are you?")
    (error,) = named(events, "error")
    assert "'box'" in error["message"], error
    assert f"{ssh.user}@127.0.0.1 port {ssh.port} refused the key" in error["message"]
    assert "authorized_keys" in error["message"]
    assert names(events)[-1] == "done"
    saved = on_disk(srv, sid)
    assert saved["active_stream_id"] is None
    assert saved["messages"][0]["content"] == "where are you?"
    assert not _tool_outputs(srv, sid)  # nothing ran anywhere

    srv.post_json("/api/environments", ssh.definition("box"))  # the same target: confirmed already
    fake.script(terminal_call(WHERE), Reply(text="Ran."))
    events = chat(srv, sid, "where are you now?")
    assert not named(events, "error") and text_of(events).endswith("Ran.")
    assert f"127.0.0.1 {ssh.port}" in _tool_outputs(srv, sid)[-1]


def test_a_dangerous_command_in_the_ssh_environment_waits_for_approval_and_a_deny_runs_nothing(
    srv, fake, ssh
):
    folder = ssh.root / "precious"
    folder.mkdir()
    sid = _remote_session(srv)
    fake.script(terminal_call(f"rm -rf {folder}"), Reply(text="Left it."))
    stream = Stream(srv, start(srv, sid, "clean up"))
    asked = stream.wait_for("approval")
    assert asked["command"] == f"rm -rf {folder}"
    time.sleep(1)
    assert folder.exists()
    assert respond(srv, sid, asked["approval_id"], "deny")[0] == 200
    stream.finish()
    assert folder.exists()
    fake.script(terminal_call(f"rm -rf {folder}"), Reply(text="Removed."))
    stream = Stream(srv, start(srv, sid, "now remove it"))
    assert respond(srv, sid, stream.wait_for("approval")["approval_id"], "once")[0] == 200
    stream.finish()
    assert not folder.exists()


def test_a_turn_where_the_definition_changed_since_the_confirmation_is_refused_and_nothing_is_saved(srv, ssh):
    sid = _remote_session(srv)
    srv.post_json("/api/environments", {**ssh.definition("box"), "ssh_user": "nobody"})
    status, data = srv.json("POST", "/api/chat/start", {"session_id": sid, "message": "run ls"})
    assert status == 409 and data["needs_confirmation"] == "box" and "nobody@127.0.0.1" in data["error"]
    assert on_disk(srv, sid)["messages"] == []


def test_a_remote_sessions_workspace_is_a_folder_checked_on_the_host_and_its_files_are_never_read_here(
    srv, fake, ssh
):
    sid = _remote_session(srv)
    assert on_disk(srv, sid)["environment_workspace"] == ssh.home  # the login's home, as that side sees it
    (ssh.remote_home / "project").mkdir()
    row = srv.post_json("/api/session/workspace", {"session_id": sid, "workspace": "~/project"})["session"]
    assert on_disk(srv, sid)["environment_workspace"] == f"{ssh.home}/project"
    assert row["session_id"] == sid
    status, data = srv.json(
        "POST", "/api/session/workspace", {"session_id": sid, "workspace": "/no/such/dir"}
    )
    assert status == 400 and f"{ssh.user}@127.0.0.1:{ssh.port}" in data["error"]
    status, data = srv.json(
        "POST", "/api/session/workspace", {"session_id": sid, "workspace": "rel; rm -rf x"}
    )
    assert status == 400
    assert on_disk(srv, sid)["environment_workspace"] == f"{ssh.home}/project"

    fake.script(terminal_call("pwd"), Reply(text="There."))
    chat(srv, sid, "where?")
    assert f"{ssh.home}/project" in _tool_outputs(srv, sid)[-1]
    # The files panel and the checkpoints read that folder there (tests/integration/test_remote_files_panel.py,
    # test_remote_turn_changes.py); a command that changes nothing takes no checkpoint.
    assert srv.get_json(f"/api/list?session_id={sid}")["workspace"] == f"{ssh.home}/project"
    listed = srv.get_json(f"/api/rollback/list?session_id={sid}")
    assert listed == {"workspace": f"{ssh.home}/project", "checkpoints": []}


def test_a_remote_sessions_file_writes_take_no_checkpoint_of_this_machines_folders(srv, fake, ssh, tmp_path):
    """The agent checkpoints the folder of a file before it writes it, reading folders of the process's own
    machine: in an environment's worker that is a folder of the same name here, not the one on the host (a
    relative path, the worker's own working folder). Such a worker takes none."""
    shared = tmp_path / "same-path-on-both-sides"  # this folder is the same one for the SSH login and here
    (shared / ".git").mkdir(parents=True)
    sid = _remote_session(srv)
    srv.post_json("/api/session/workspace", {"session_id": sid, "workspace": str(shared)})
    written = {"id": "w1", "name": "write_file", "arguments": {"path": f"{shared}/plan.txt", "content": "p"}}
    fake.script(Reply(tool_calls=[written]), Reply(text="Written."))
    assert text_of(chat(srv, sid, "write the plan")).endswith("Written.")
    assert (shared / "plan.txt").read_text() == "p"
    store = srv.hermes_home / "checkpoints" / "store" / "projects"
    assert not store.exists() or not list(store.iterdir())


@pytest.mark.parametrize(
    ("definition", "advice"),
    [
        ({"backend": "docker", "docker_image": "debian:stable"}, "Docker daemon"),
        ({"backend": "modal"}, "Modal credentials"),
        ({"backend": "daytona"}, "DAYTONA_API_KEY"),
    ],
)
def test_a_container_environment_without_its_daemon_or_credentials_ends_the_turn_with_what_to_fix(
    srv, definition, advice
):
    if definition["backend"] == "docker" and sshd.docker_daemon_answers():
        pytest.skip("a Docker daemon answers here")
    srv.post_json("/api/environments", {"name": "sandbox", **definition})
    srv.post_json("/api/environments/confirm", {"name": "sandbox"})
    sid = _remote_session(srv, "sandbox")
    events = chat(srv, sid, "build it")
    (error,) = named(events, "error")
    assert "'sandbox'" in error["message"] and advice in error["message"], error
    assert on_disk(srv, sid)["messages"][0]["content"] == "build it"


def test_two_environments_run_at_once_each_in_its_own_worker_on_its_own_host_and_a_changed_one_is_stopped(
    srv, fake, ssh, tmp_path
):
    with sshd.SshServer(tmp_path / "other_sshd") as other:
        srv.post_json("/api/environments", {**other.definition("other"), "ssh_key": str(ssh.client_key)})
        other.authorized_keys.write_text((ssh.root / "client_key.pub").read_text())
        srv.post_json("/api/environments/confirm", {"name": "other"})
        first, second = _remote_session(srv), _remote_session(srv, "other")
        before = set(worker_pids(srv, "ssh:"))
        fake.script(terminal_call(held(ssh.root / "go2")))
        one = Stream(srv, start(srv, first, "first host"))
        one.wait_for("tool")
        command = {"id": "s1", "name": "terminal", "arguments": {"command": WHERE}}
        fake.script(Reply(tool_calls=[command], for_user="second host"))
        two = Stream(srv, start(srv, second, "second host"))
        two.wait_for("tool_complete")
        assert not named(one.events, "tool_complete")  # both at once, in two worker processes
        workers = set(worker_pids(srv, "ssh:")) - before  # not the local pool's, which titles may start
        (ssh.root / "go2").touch()
        assert len(workers) == 2
        one.finish()
        two.finish()
        assert f"127.0.0.1 {ssh.port}" in _tool_outputs(srv, first)[-1]
        assert f"127.0.0.1 {other.port}" in _tool_outputs(srv, second)[-1]

        # Pointing "other" elsewhere stops its worker: nothing set up for the old host serves the new one.
        srv.post_json("/api/environments", {**other.definition("other"), "ssh_port": ssh.port})
        deadline = time.monotonic() + 30
        while len(set(worker_pids(srv)) & set(workers)) > 1 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert len(set(worker_pids(srv)) & set(workers)) == 1
        status, data = srv.json("POST", "/api/chat/start", {"session_id": second, "message": "again"})
        assert status == 409 and data["needs_confirmation"] == "other"


def test_test_connection_while_a_turn_runs_there_leaves_the_turns_connection_alone(srv, fake, ssh):
    """The agent keys its SSH master connection by user@host:port; the test's teardown closed the turn's."""
    sid = _remote_session(srv)
    fake.script(terminal_call(held(ssh.root / "go3")), Reply(text="Still connected."))
    stream = Stream(srv, start(srv, sid, "hold on"))
    stream.wait_for("tool")
    time.sleep(1)
    assert srv.post_json("/api/environments/test", {"name": "box"})["ok"] is True
    (ssh.root / "go3").touch()
    events = stream.finish()
    assert not named(events, "error")
    assert f"127.0.0.1 {ssh.port}" in _tool_outputs(srv, sid)[-1]


def test_dont_ask_again_lets_a_remote_sessions_flagged_command_run_there_and_only_for_that_session(
    srv, fake, ssh
):
    sid = _remote_session(srv)
    srv.post_json("/api/approval/yolo", {"session_id": sid, "enabled": True})
    folder = ssh.root / "yolo"
    folder.mkdir()
    fake.script(terminal_call(f"rm -rf {folder}"), Reply(text="Removed."))
    events = Stream(srv, start(srv, sid, "remove it")).finish()
    assert "approval" not in names(events) and not folder.exists()
    kept = ssh.root / "yolo_other"
    kept.mkdir()
    other = _remote_session(srv)
    fake.script(terminal_call(f"rm -rf {kept}"), Reply(text="Left it."))
    stream = Stream(srv, start(srv, other, "remove that"))
    assert respond(srv, other, stream.wait_for("approval")["approval_id"], "deny")[0] == 200
    stream.finish()
    assert kept.exists()


def test_a_deep_temp_folder_still_holds_the_ssh_connections_socket(llm, fake, ssh, tmp_path):
    """A deep ``TMPDIR`` (macOS gives one) put the agent's SSH master socket under the worker's own temp folder
    past a Unix socket's path limit ("path too long for Unix domain socket"), so no command of a turn reached the
    host. The worker's folder now goes in a short temp folder when the socket would not fit."""
    # 50 characters: the agent's own socket fits under it (the server's checks make one there), the worker's
    # under a folder of its own inside it did not.
    deep = Path(tempfile.mkdtemp(prefix="talaria-deep-temp-folder-", dir="/tmp"))
    deep = deep.rename(deep.with_name(deep.name.ljust(45, "x")))
    assert len(str(deep)) == 50
    try:
        _with_deep_temp(llm, fake, ssh, tmp_path, deep)
    finally:
        shutil.rmtree(deep, ignore_errors=True)


def _with_deep_temp(llm, fake, ssh, tmp_path: Path, deep: Path) -> None:
    with _server(tmp_path / "srv", llm.base_url, ssh, TMPDIR=str(deep)) as server:
        server.post_json("/api/environments", ssh.definition("box"))
        server.post_json("/api/environments/confirm", {"name": "box"})
        sid = _remote_session(server)
        fake.script(terminal_call(WHERE), Reply(text="Ran there."))
        assert text_of(chat(server, sid, "where are you?")).endswith("Ran there.")
        (out,) = [o for o in _tool_outputs(server, sid) if "conn=" in o]
        assert f"127.0.0.1 {ssh.port}" in out

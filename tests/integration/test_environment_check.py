""" "Test connection" (``api.services.environment_check``) through the agent's own backends: against a real OpenSSH
server on 127.0.0.1 (it answers with its host name and folder; a refused key and a closed port say what
failed and what to fix), and the Docker, Modal and Singularity backends' own error paths on a machine
without their daemons or credentials."""

from __future__ import annotations

import os
import socket

import pytest

from talaria_testing import sshd
from talaria_testing.server_proc import ServerProc

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(bool(sshd.available()), reason=sshd.available() or "ok"),
]


@pytest.fixture(scope="module")
def ssh(tmp_path_factory):
    with sshd.SshServer(tmp_path_factory.mktemp("sshd")) as server:
        yield server


@pytest.fixture(scope="module")
def srv(tmp_path_factory, ssh):
    path = f"{ssh.client_path}{os.pathsep}{os.environ.get('PATH', '')}"
    with ServerProc(tmp_path_factory.mktemp("environment_check"), env={"PATH": path}) as server:
        yield server


def _define(srv, body: dict) -> None:
    srv.post_json("/api/environments", body)
    srv.post_json("/api/environments/confirm", {"name": body["name"]})


def _test(srv, name: str) -> dict:
    return srv.post_json("/api/environments/test", {"name": name})


def test_the_ssh_server_answers_with_its_host_name_and_folder_and_gets_what_the_agent_copies(srv, ssh):
    _define(srv, ssh.definition("sshbox"))
    answer = _test(srv, "sshbox")
    assert answer["ok"] is True, answer
    assert answer["host"] == socket.gethostname()
    assert answer["cwd"] == ssh.home  # the remote user's home, which is the test's folder in sshd's namespace
    assert answer["target"] == f"{ssh.user}@127.0.0.1:{ssh.port}"
    assert 0 < answer["elapsed_ms"] < 20000
    assert (ssh.remote_home / ".hermes").is_dir()  # the agent's file sync ran, as the confirmation says


def test_a_test_is_refused_until_the_person_confirmed_what_the_agent_copies(srv, ssh):
    srv.post_json("/api/environments", ssh.definition("unconfirmed"))
    status, data = srv.json("POST", "/api/environments/test", {"name": "unconfirmed"})
    assert status == 409 and data["needs_confirmation"] == "unconfirmed"
    assert not (ssh.root / "known_hosts").exists() or f":{ssh.port}" in (ssh.root / "known_hosts").read_text()


def test_a_refused_key_names_the_host_and_says_which_key_to_add(srv, ssh):
    _define(srv, ssh.definition("badkey", key=ssh.refused_key))
    answer = _test(srv, "badkey")
    assert answer["ok"] is False
    assert "Permission denied" in answer["error"]
    assert f"{ssh.user}@127.0.0.1 port {ssh.port} refused the key" in answer["fix"]
    assert "authorized_keys" in answer["fix"]


def test_a_closed_port_says_nothing_answered_there(srv, ssh):
    closed = sshd.free_port()
    _define(srv, ssh.definition("closed", port=closed))
    answer = _test(srv, "closed")
    assert answer["ok"] is False
    assert "Connection refused" in answer["error"]
    assert f"Nothing answered SSH at {ssh.user}@127.0.0.1 port {closed}" in answer["fix"]


def test_local_answers_with_this_machine(srv):
    answer = _test(srv, "local")
    assert answer["ok"] is True and answer["host"] == socket.gethostname()
    assert answer["cwd"] == str(srv.workspace.resolve())


@pytest.mark.parametrize(
    ("body", "error", "fix"),
    [
        ({"backend": "docker", "docker_image": "python:3.11-slim"}, "docker", "Docker daemon"),
        ({"backend": "modal", "modal_image": "python:3.11"}, "Modal", "modal token new"),
        ({"backend": "singularity"}, "apptainer", "Apptainer"),
    ],
)
def test_a_backend_without_its_daemon_or_credentials_says_what_to_set_up(srv, body, error, fix):
    if body["backend"] == "docker" and sshd.docker_daemon_answers():
        pytest.skip("a Docker daemon answers here")
    name = f"no-{body['backend']}"
    _define(srv, {"name": name, **body})
    answer = _test(srv, name)
    assert answer["ok"] is False
    assert error.lower() in answer["error"].lower() and fix in answer["fix"]

"""Paths and reach of the files panel in an SSH environment (``api.services.environment_shell``): every path
is relative to the session's folder there and resolved on that host, so ``..``, absolute paths, ``~`` and
links out of the folder are refused while hostile names are read as the names they are; a host that
stops answers at once with what to fix, as a turn does, and the panel works again once it is back."""

from __future__ import annotations

import json
import time
from urllib.parse import quote

import pytest

from talaria_testing import sshd
from tests.integration.test_environment_workers import _remote_session, _server

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(bool(sshd.available()), reason=sshd.available() or "ok"),
]

HOSTILE = 'it\'s a "name"\nwith $(touch pwned) and spaces;.txt'


def _get(srv, route: str, sid: str, path: str) -> tuple[int, dict]:
    status, _, raw = srv.request("GET", f"{route}?session_id={sid}&path={quote(path)}")
    return status, json.loads(raw)


def _setup(srv, ssh) -> str:
    srv.post_json("/api/environments", ssh.definition("box"))
    srv.post_json("/api/environments/confirm", {"name": "box"})
    folder = ssh.remote_home / "work"
    folder.mkdir(exist_ok=True)
    sid = _remote_session(srv)
    srv.post_json("/api/session/workspace", {"session_id": sid, "workspace": "~/work"})
    return sid


def test_paths_out_of_the_folder_are_refused_and_hostile_names_are_read_as_they_are(llm, tmp_path):
    with sshd.SshServer(tmp_path / "sshd") as ssh, _server(tmp_path / "srv", llm.base_url, ssh) as srv:
        sid = _setup(srv, ssh)
        work = ssh.remote_home / "work"
        (ssh.remote_home / "secret.txt").write_text("outside\n")
        (work / HOSTILE).write_text("hostile but harmless\n")
        (work / "-rf").write_text("a name like an option\n")
        # Relative targets: the login's home is mounted elsewhere on that side.
        (work / "out").symlink_to("..")
        (work / "secret_link.txt").symlink_to("../secret.txt")
        (work / "inner").mkdir()
        (work / "inner_link").symlink_to("inner")

        for route in ("/api/file", "/api/file/raw", "/api/list", "/api/git/diff"):
            for path in (
                "../secret.txt",
                "inner/../../secret.txt",
                "/etc/passwd",
                f"{ssh.home}/secret.txt",
                "~/secret.txt",
                "~",
                "out/secret.txt",
                "secret_link.txt",
                "out",
            ):
                status, data = _get(srv, route, sid, path)
                assert status in (403, 404), (route, path, status, data)
                assert "outside" not in json.dumps(data.get("content", "")), (route, path)

        listing = srv.get_json(f"/api/list?session_id={sid}")
        rows = {row["name"]: row for row in listing["entries"]}
        assert rows["out"]["link"] == "outside" and rows["out"]["type"] == "link"
        assert rows["secret_link.txt"]["link"] == "outside"
        assert rows["inner_link"] == {**rows["inner_link"], "link": "inside", "type": "dir"}
        assert rows[HOSTILE]["type"] == "file" and rows[HOSTILE]["path"] == HOSTILE

        status, data = _get(srv, "/api/file", sid, HOSTILE)
        assert status == 200 and data["content"] == "hostile but harmless\n" and data["name"] == HOSTILE
        status, data = _get(srv, "/api/file", sid, "-rf")
        assert status == 200 and data["content"] == "a name like an option\n"
        assert not (work / "pwned").exists() and not (ssh.remote_home / "pwned").exists()
        status, data = _get(srv, "/api/list", sid, "inner_link")
        assert status == 200 and data["path"] == "inner"


def test_a_stopped_host_answers_at_once_with_what_to_fix_and_the_panel_works_once_it_is_back(llm, tmp_path):
    with sshd.SshServer(tmp_path / "sshd") as ssh, _server(tmp_path / "srv", llm.base_url, ssh) as srv:
        sid = _setup(srv, ssh)
        (ssh.remote_home / "work" / "here.txt").write_text("still here\n")
        assert [row["name"] for row in srv.get_json(f"/api/list?session_id={sid}")["entries"]] == ["here.txt"]

        ssh.drop()
        where = f"{ssh.user}@127.0.0.1 port {ssh.port}"
        for route in ("/api/list", "/api/file", "/api/git/status"):
            started = time.monotonic()
            status, data = _get(srv, route, sid, "here.txt" if route == "/api/file" else "")
            assert status == 502, (route, data)
            assert "'box'" in data["error"] and f"Nothing answered SSH at {where}" in data["error"], data
            assert time.monotonic() - started < 20

        ssh.start()
        status, data = _get(srv, "/api/file", sid, "here.txt")
        assert status == 200 and data["content"] == "still here\n"


def test_a_host_never_reached_says_so_before_any_turn_made_a_connection(llm, tmp_path):
    with sshd.SshServer(tmp_path / "sshd") as ssh, _server(tmp_path / "srv", llm.base_url, ssh) as srv:
        sid = _setup(srv, ssh)
        srv.post_json("/api/environments/test", {"name": "box"})
        # The worker's own connection is first made by this read; the host is gone before it.
        srv.post_json("/api/environments", {**ssh.definition("box"), "ssh_port": sshd.free_port()})
        srv.post_json("/api/environments/confirm", {"name": "box"})
        status, data = _get(srv, "/api/list", sid, "")
        assert status == 502 and "Nothing answered SSH" in data["error"], data

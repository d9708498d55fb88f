"""Named execution environments end to end (``api.services.environments``): defined in the agent's config.yaml
through the page's routes, listed without key contents, confirmed once per target, and chosen per session;
turns there are in ``test_environment_workers.py``, against a real OpenSSH server."""

from __future__ import annotations

import pytest
import yaml

from talaria_testing.chat_client import on_disk
from talaria_testing.server_proc import ServerProc

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    with ServerProc(tmp_path_factory.mktemp("environments")) as server:
        yield server


def _config(srv) -> dict:
    return yaml.safe_load((srv.hermes_home / "config.yaml").read_text()) or {}


def _box(name: str = "box", **changes) -> dict:
    return {
        "name": name,
        "backend": "ssh",
        "ssh_host": "build.example",
        "ssh_user": "dev",
        "ssh_port": 2222,
        **changes,
    }


def test_local_is_always_listed_and_cannot_be_changed(srv):
    rows = srv.get_json("/api/environments")["environments"]
    assert rows[0] == {
        "name": "local",
        "backend": "local",
        "target": "local",
        "remote": False,
        "confirmed": True,
    }
    status, data = srv.json("POST", "/api/environments", {"name": "local", "backend": "ssh"})
    assert status == 400 and "local" in data["error"]


def test_an_environment_is_written_with_the_agents_terminal_keys_and_listed_without_the_keys_contents(
    srv, tmp_path
):
    key = tmp_path / "id_test"
    key.write_text("-----BEGIN OPENSSH PRIVATE KEY-----\nSECRETKEYMATERIAL\n")
    srv.post_json("/api/environments", _box(ssh_key=str(key)))
    written = _config(srv)["webui"]["environments"]["box"]
    assert written == {
        "backend": "ssh",
        "ssh_host": "build.example",
        "ssh_user": "dev",
        "ssh_port": 2222,
        "ssh_key": str(key),
    }
    status, headers, raw = srv.request("GET", "/api/environments")
    assert status == 200 and b"SECRETKEYMATERIAL" not in raw
    row = next(r for r in srv.get_json("/api/environments")["environments"] if r["name"] == "box")
    assert row["target"] == "dev@build.example:2222" and row["remote"] and not row["confirmed"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (_box(ssh_host="-oProxyCommand=touch /tmp/x"), "ssh_host"),
        (_box(ssh_host="a b"), "ssh_host"),
        (_box(ssh_user="-l"), "ssh_user"),
        (_box(ssh_port=0), "ssh_port"),
        (_box(ssh_port="22; rm"), "ssh_port"),
        (_box(ssh_port=True), "ssh_port"),
        (_box(ssh_key=["x"]), "ssh_key"),
        (_box(name="../etc"), "name"),
        (_box(name=""), "name"),
        (_box(backend="telnet"), "backend"),
        ({"name": "img", "backend": "docker", "docker_image": "--privileged"}, "docker_image"),
    ],
)
def test_a_bad_definition_names_the_field_and_writes_nothing(srv, body, field):
    before = (
        (srv.hermes_home / "config.yaml").read_bytes() if (srv.hermes_home / "config.yaml").exists() else b""
    )
    status, data = srv.json("POST", "/api/environments", body)
    assert status == 400 and field in data["error"]
    after = (
        (srv.hermes_home / "config.yaml").read_bytes() if (srv.hermes_home / "config.yaml").exists() else b""
    )
    assert after == before


def test_a_remote_environment_is_chosen_for_a_session_only_after_the_person_confirmed_its_target(srv):
    srv.post_json("/api/environments", _box("confirm-me"))
    sid = srv.post_json("/api/session/new", {})["session"]["session_id"]
    status, data = srv.json(
        "POST", "/api/session/environment", {"session_id": sid, "environment": "confirm-me"}
    )
    assert status == 409 and data["needs_confirmation"] == "confirm-me"
    assert "environment" not in on_disk(srv, sid)

    copies = srv.get_json("/api/environments/copies?name=confirm-me")
    assert copies["target"] == "dev@build.example:2222" and copies["destination"].startswith("~/.hermes")
    srv.post_json("/api/environments/confirm", {"name": "confirm-me"})
    # Confirmed, the choice checks the session's folder on that host: one that cannot be reached is named.
    status, data = srv.json(
        "POST", "/api/session/environment", {"session_id": sid, "environment": "confirm-me"}
    )
    assert status == 400 and "dev@build.example:2222" in data["error"] and "check ssh_host" in data["error"]
    assert "environment" not in on_disk(srv, sid)

    # Another host under the same name asks again.
    srv.post_json("/api/environments", _box("confirm-me", ssh_host="other.example"))
    row = next(r for r in srv.get_json("/api/environments")["environments"] if r["name"] == "confirm-me")
    assert not row["confirmed"]

    srv.post_json("/api/session/environment", {"session_id": sid, "environment": "local"})
    assert "environment" not in on_disk(srv, sid)


@pytest.mark.parametrize(
    ("body", "status"),
    [
        ({"session_id": "x", "environment": "nowhere"}, 404),
        ({"session_id": "x", "environment": "../../etc"}, 400),
        ({"session_id": "x", "environment": 7}, 400),
        ({"session_id": "../x", "environment": "local"}, 400),
    ],
)
def test_a_bad_session_choice_gets_a_clear_error(srv, body, status):
    sid = srv.post_json("/api/session/new", {})["session"]["session_id"]
    if body["session_id"] == "x":
        body = {**body, "session_id": sid}
    got, data = srv.json("POST", "/api/session/environment", body)
    assert got == status and data["error"]


def test_deleting_an_environment_forgets_its_confirmation(srv):
    srv.post_json("/api/environments", _box("gone"))
    srv.post_json("/api/environments/confirm", {"name": "gone"})
    srv.post_json("/api/environments", {"name": "gone", "delete": True})
    webui = _config(srv)["webui"]
    assert "gone" not in webui["environments"] and "gone" not in webui.get("environments_confirmed", {})
    status, _ = srv.json("POST", "/api/environments", {"name": "gone", "delete": True})
    assert status == 404


def test_a_hand_written_definition_that_fails_the_checks_is_listed_with_the_reason_and_never_used(srv):
    """A host written by hand as an ssh option reached the agent's ssh command line."""
    config = _config(srv)
    config.setdefault("webui", {}).setdefault("environments", {})["handmade"] = {
        "backend": "ssh", "ssh_host": "-oProxyCommand=touch pwned", "ssh_user": "dev",
    }  # fmt: skip
    config["webui"]["environments_confirmed"] = {"handmade": "dev@-oProxyCommand=touch pwned:22"}
    (srv.hermes_home / "config.yaml").write_text(yaml.safe_dump(config))
    row = next(r for r in srv.get_json("/api/environments")["environments"] if r["name"] == "handmade")
    assert "ssh_host" in row["error"] and not row["confirmed"]
    status, data = srv.json("POST", "/api/environments/test", {"name": "handmade"})
    assert status == 400 and "config.yaml" in data["error"] and "ssh_host" in data["error"]
    assert not (srv.workspace / "pwned").exists()

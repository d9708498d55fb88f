"""Attachments end to end: the real server and hermes-agent; a model the agent finds vision-capable (or that a
person marked so in the setup form) gets images as image parts, a text-only one their paths; the turn is saved
whole."""

from __future__ import annotations

import base64

import pytest
import yaml

from talaria_testing.chat_client import read_all, session
from talaria_testing.fake_llm import FakeLLM, Reply, agent_server
from talaria_testing.server_proc import ServerProc

pytestmark = pytest.mark.integration

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNg+M8AAAMBAQAY3Y20AAAAAElFTkSuQmCC"
)


DATA_URL = "data:image/png;base64," + base64.b64encode(PNG).decode()
IMAGE_LINE = "[Attached image: uploads/dot.png (in the workspace)]"


@pytest.fixture(scope="module")
def seeing():
    """A fake whose model says it can see images the way a local Ollama does; the agent reads that."""
    with FakeLLM(vision_models=("fake-model",)) as server:
        yield server


@pytest.fixture(scope="module")
def srv(tmp_path_factory, seeing):
    root = tmp_path_factory.mktemp("attach")
    env = {"TALARIA_WORKSPACE_ROOTS": str(root)}
    with agent_server(root, seeing.base_url, env=env) as server:  # the agent's default routing: auto
        yield server


def _workspace_session(srv) -> str:
    workspace = srv.root / f"ws-{len(list(srv.root.iterdir()))}"
    workspace.mkdir()
    return srv.post_json("/api/session/new", {"workspace": str(workspace)})["session"]["session_id"]


def _attach(srv, sid: str, name: str, data: bytes) -> dict:
    body = {"session_id": sid, "name": name, "data": base64.b64encode(data).decode()}
    return srv.post_json("/api/session/attach", body)["attachment"]


def _user_contents(llm) -> list:
    """The content of every user message the fake received, in order."""
    return [
        m["content"]
        for request in llm.chat_requests()
        for m in request["body"]["messages"]
        if m["role"] == "user"
    ]


def _image_urls(contents: list) -> list[str]:
    return [
        part["image_url"]["url"]
        for content in contents
        if isinstance(content, list)
        for part in content
        if isinstance(part, dict) and part.get("type") == "image_url"
    ]


def test_an_attached_image_reaches_a_vision_capable_model_as_an_image_part(srv, seeing):
    """Issue 19.16, end to end with a model the agent itself finds vision-capable (no override)."""
    seeing.reset()
    sid = _workspace_session(srv)
    image = _attach(srv, sid, "dot.png", PNG)
    notes = _attach(srv, sid, "notes.txt", b"hi")
    seeing.script(Reply(text="A single dot."))
    started = srv.post_json(
        "/api/chat/start",
        {"session_id": sid, "message": "What is this?", "attachments": [image["path"], notes["path"]]},
    )
    read_all(srv, started["stream_id"])
    assert len(seeing.chat_requests()) == 1  # the model saw it itself: no describing call first
    final_user = _user_contents(seeing)[-1]
    assert _image_urls([final_user]) == [DATA_URL]
    assert "[Attached file: uploads/notes.txt (in the workspace)]" in str(final_user)
    saved = session(srv, sid)["messages"]
    assert [m["role"] for m in saved] == ["user", "assistant"]
    assert saved[0]["content"] == (
        f"What is this?\n\n{IMAGE_LINE}\n[Attached file: uploads/notes.txt (in the workspace)]"
    )
    assert [a["path"] for a in saved[0]["attachments"]] == ["uploads/dot.png", "uploads/notes.txt"]
    assert saved[1]["content"] == "A single dot."


def _setup_and_send_image(llm, root, vision: bool | None) -> list:
    """An empty home set up through the form (optionally marking the model), then one image sent."""
    server = ServerProc(root, env={"TALARIA_AGENT_TOOLSETS": "none", "TALARIA_WORKSPACE_ROOTS": str(root)})
    with server:
        body = {"kind": "custom", "base_url": llm.base_url, "model": "fake-model"}
        if vision is not None:
            body["supports_vision"] = vision
        status = server.post_json("/api/onboarding/setup", body)
        assert status["supports_vision"] is bool(vision)
        sid = _workspace_session(server)
        image = _attach(server, sid, "dot.png", PNG)
        llm.script(Reply(text="Seen."))
        started = server.post_json(
            "/api/chat/start", {"session_id": sid, "message": "Look", "attachments": [image["path"]]}
        )
        read_all(server, started["stream_id"])
        assert session(server, sid)["messages"][-1]["content"] == "Seen."
    return _user_contents(llm)


def test_a_model_marked_vision_capable_in_the_setup_form_gets_the_image(llm, tmp_path):
    """Issue 19.16: a custom model the agent knows nothing about got the path; the form's switch writes
    the agent's own ``model.supports_vision``, and the image then reaches the model as an image part."""
    llm.reset()
    contents = _setup_and_send_image(llm, tmp_path, vision=True)
    config = yaml.safe_load((tmp_path / "hermes_home" / "config.yaml").read_text(encoding="utf-8"))
    assert config["model"]["supports_vision"] is True
    assert _image_urls(contents) == [DATA_URL] and len(llm.chat_requests()) == 1


def test_a_text_only_model_gets_the_images_path_in_the_text(llm, tmp_path):
    llm.reset()
    contents = _setup_and_send_image(llm, tmp_path, vision=None)
    assert _image_urls(contents) == []
    assert contents[-1] == f"Look\n\n{IMAGE_LINE}"


def test_the_vision_switch_must_be_a_boolean_and_a_bad_one_writes_nothing(llm, tmp_path):
    with ServerProc(tmp_path, env={"TALARIA_AGENT_TOOLSETS": "none"}) as server:
        body = {"kind": "custom", "base_url": llm.base_url, "model": "m", "supports_vision": "yes"}
        code, data = server.json("POST", "/api/onboarding/setup", body)
        assert code == 400 and "supports_vision" in data["error"]
        assert not (server.hermes_home / "config.yaml").exists()


@pytest.mark.parametrize(
    ("body", "status"),
    [
        ({"name": "x.png", "data": "%%%"}, 400),
        ({"name": "x.exe", "data": "TVo="}, 415),
        ({"name": "x.txt"}, 400),
    ],
)
def test_bad_uploads_get_a_json_error_and_write_nothing(srv, body, status):
    workspace = srv.root / f"bad-{status}-{len(body)}"
    workspace.mkdir(exist_ok=True)
    sid = srv.post_json("/api/session/new", {"workspace": str(workspace)})["session"]["session_id"]
    with pytest.raises(AssertionError, match=f"→ {status}"):
        srv.post_json("/api/session/attach", {"session_id": sid, **body})
    assert not (workspace / "uploads").exists() or not any((workspace / "uploads").iterdir())

"""Attachments end to end: the real server and hermes-agent; a model set up to see images gets them as
image parts, and the turn is saved whole."""

from __future__ import annotations

import base64

import pytest

from talaria_testing.chat_client import read_all, session
from talaria_testing.fake_llm import Reply, agent_server

pytestmark = pytest.mark.integration

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNg+M8AAAMBAQAY3Y20AAAAAElFTkSuQmCC"
)


@pytest.fixture(scope="module")
def srv(tmp_path_factory, llm):
    root = tmp_path_factory.mktemp("attach")
    env = {"TALARIA_WORKSPACE_ROOTS": str(root)}
    # The agent's own image routing decides; "native" says this model takes image parts.
    extra = {"agent": {"image_input_mode": "native"}}
    with agent_server(root, llm.base_url, env=env, extra=extra) as server:
        yield server


def test_an_attached_image_reaches_the_model_as_an_image_part(srv, llm):
    workspace = srv.root / "ws"
    workspace.mkdir()
    sid = srv.post_json("/api/session/new", {"workspace": str(workspace)})["session"]["session_id"]
    image = srv.post_json(
        "/api/session/attach", {"session_id": sid, "name": "dot.png", "data": base64.b64encode(PNG).decode()}
    )["attachment"]
    notes = srv.post_json(
        "/api/session/attach",
        {"session_id": sid, "name": "notes.txt", "data": base64.b64encode(b"hi").decode()},
    )["attachment"]
    # The agent routes the image itself: to the model as is, or first through its vision step (which
    # asks the same endpoint to describe it). Either way the pixels leave as an image part.
    llm.script(Reply(text="A single dot."), Reply(text="A single dot."))
    message = "What is this?"
    started = srv.post_json(
        "/api/chat/start",
        {"session_id": sid, "message": message, "attachments": [image["path"], notes["path"]]},
    )
    read_all(srv, started["stream_id"])
    data_url = "data:image/png;base64," + base64.b64encode(PNG).decode()
    sent_parts = [
        part
        for request in llm.chat_requests()
        for m in request["body"]["messages"]
        if m["role"] == "user" and isinstance(m["content"], list)
        for part in m["content"]
    ]
    assert {"type": "image_url", "image_url": {"url": data_url}} in [
        {"type": p["type"], "image_url": {"url": p["image_url"]["url"]}}
        for p in sent_parts
        if p["type"] == "image_url"
    ]
    final_user = [m for m in llm.chat_requests()[-1]["body"]["messages"] if m["role"] == "user"][-1]
    assert "[Attached file: uploads/notes.txt (in the workspace)]" in str(final_user["content"])
    saved = session(srv, sid)["messages"]
    assert [m["role"] for m in saved] == ["user", "assistant"]
    assert saved[0]["content"] == (
        "What is this?\n\n[Attached image: uploads/dot.png (in the workspace)]\n"
        "[Attached file: uploads/notes.txt (in the workspace)]"
    )
    assert [a["path"] for a in saved[0]["attachments"]] == ["uploads/dot.png", "uploads/notes.txt"]
    assert saved[1]["content"] == "A single dot."


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

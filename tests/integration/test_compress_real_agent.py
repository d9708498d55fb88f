"""Manual compression through the real hermes-agent ``ContextCompressor`` on the real server.

The fake LLM on 127.0.0.1 serves the summary; nothing else is faked.
"""

from __future__ import annotations

import json
import re

import pytest

from talaria_testing import hermes_webui
from talaria_testing.chat_client import chat
from talaria_testing.fake_llm import FakeLLM, agent_server

pytestmark = pytest.mark.integration
MARKER = "[CONTEXT COMPACTION — REFERENCE ONLY]"
SID = "realcompress"


def _conversation(pairs=12):
    rows = []
    for i in range(pairs):
        rows.append(
            {"role": "user", "content": f"Question {i}: " + "tell me more " * 40, "timestamp": 1000.0 + 2 * i}
        )
        rows.append(
            {
                "role": "assistant",
                "content": f"Answer {i}: " + "here is more " * 60,
                "timestamp": 1001.0 + 2 * i,
            }
        )
    return rows


def _write_session(session_dir, messages):
    session_dir.mkdir(parents=True, exist_ok=True)
    payload = {
        "session_id": SID,
        "title": "Long talk",
        "model": "fake-model",
        "created_at": 1.0,
        "updated_at": 2.0,
        "messages": messages,
    }
    (session_dir / f"{SID}.json").write_text(json.dumps(payload), encoding="utf-8")


def _on_disk(srv):
    return json.loads((srv.session_dir / f"{SID}.json").read_text(encoding="utf-8"))


@pytest.fixture
def llm():
    with FakeLLM() as fake:
        yield fake


def test_compress_with_the_real_agent_changes_only_the_context_and_survives_restart(tmp_path, llm):
    srv = agent_server(tmp_path, llm.base_url)
    original = _conversation()
    _write_session(srv.session_dir, original)
    with srv.start():
        status, _, body = srv.request(
            "POST", "/api/session/compress", {"session_id": SID, "focus_topic": "the answers"}
        )
        assert status == 200, body
        answer = json.loads(body)
        assert answer["ok"] is True
        assert "context_messages" not in answer["session"]
        assert llm.summary_requests(), "the compressor asked the fake LLM for a summary"
        assert "the answers" in json.dumps(llm.summary_requests()[-1]["body"])
    data = _on_disk(srv)
    assert data["messages"] == original
    assert any(MARKER in str(m.get("content")) for m in data["context_messages"])
    assert not any(MARKER in str(m.get("content")) for m in data["messages"])
    assert len(data["context_messages"]) < len(original)
    assert data["compression_anchor_mode"] == "manual"
    assert data["truncation_watermark"] == data["truncation_boundary"]

    with srv.start():  # a restart runs startup recovery; the compression must stand
        session = srv.get_json(f"/api/session?session_id={SID}")["session"]
        assert session["compression_anchor_mode"] == "manual"
    after = _on_disk(srv)
    assert after["messages"] == original
    assert after["context_messages"] == data["context_messages"]


def test_compress_bad_input_is_a_clear_json_error_and_changes_nothing(tmp_path, llm):
    srv = agent_server(tmp_path, llm.base_url)
    _write_session(srv.session_dir, _conversation(1))
    before = (srv.session_dir / f"{SID}.json").read_bytes()
    with srv.start():
        cases = [
            ({}, 400, "Missing required field(s): session_id"),
            ({"session_id": "   "}, 400, "session_id is required"),
            ({"session_id": "../etc/passwd"}, 400, None),
            ({"session_id": "nope"}, 404, "Session not found"),
            (
                {"session_id": SID, "focus_topic": "x" * 100_000},
                400,
                "Not enough conversation to compress (need at least 4 messages).",
            ),
        ]
        for payload, want_status, want_error in cases:
            status, headers, body = srv.request("POST", "/api/session/compress", payload)
            assert status == want_status, (payload, body)
            error = json.loads(body)["error"]
            assert error
            if want_error:
                assert error == want_error
    assert (srv.session_dir / f"{SID}.json").read_bytes() == before


def test_compress_reports_the_same_kind_of_figure_as_the_context_meter(tmp_path, llm):
    """/compress said ~67 tokens while the meter said 1.6k: the meter shows the provider's count of the
    last request (system prompt and tools included) and compression counted the messages alone. It now
    counts as hermes' own /compress does (estimate_request_tokens_rough with the system prompt and tools)."""
    srv = agent_server(tmp_path, llm.base_url)
    with srv.start():
        sid = srv.post_json("/api/session/new", {})["session"]["session_id"]
        llm.script("First answer.", "Second answer.")
        chat(srv, sid, "First question")
        chat(srv, sid, "Second question")
        meter = srv.get_json(f"/api/session?session_id={sid}")["session"]["last_prompt_tokens"]
        status, _, body = srv.request("POST", "/api/session/compress", {"session_id": sid})
        assert status == 200, body
        line = json.loads(body)["summary"]["token_line"]
    before = int(re.search(r"~([\d,]+)", line).group(1).replace(",", ""))
    # The last request held the system prompt, the tools and all but the last answer: the estimate of the
    # whole conversation is of that size, not a few percent of it.
    assert meter > 500, meter
    assert 0.5 * meter <= before <= 2 * meter, (line, meter)


def test_uncompress_survives_a_turn_saved_by_hermes_webui_in_between(tmp_path, llm):
    """Switching to hermes-webui and back: its Session drops the keys it does not know, so its next turn
    rewrote the file without compression_generation and compression_undo, and /uncompress was gone. The
    undo lives beside the file and the generation in compression_anchor_details, which it keeps."""
    srv = agent_server(tmp_path, llm.base_url)
    original = _conversation()
    _write_session(srv.session_dir, original)
    path = srv.session_dir / f"{SID}.json"
    with srv.start():
        status, _, body = srv.request("POST", "/api/session/compress", {"session_id": SID})
        assert status == 200, body
    compressed = _on_disk(srv)
    # hermes-webui takes over the folder and runs a turn.
    webui = hermes_webui.run_turn(path, "one more question", "one more answer")
    assert "compression_undo" not in _on_disk(srv) and "compression_generation" not in _on_disk(srv)
    assert webui["context_messages"][-1]["content"] == "one more answer"
    with srv.start():  # back to Talaria
        assert srv.get_json(f"/api/session?session_id={SID}")["session"]["can_uncompress"] is True
        restored = srv.post_json("/api/session/uncompress", {"session_id": SID})["session"]
        assert restored["compression_anchor_mode"] is None
        assert [m["content"] for m in restored["messages"][-2:]] == ["one more question", "one more answer"]
    data = _on_disk(srv)
    assert data["messages"][: len(original)] == original and len(data["messages"]) == len(original) + 2
    # The model context is the whole transcript again (it was before the compression), the new turn included.
    assert data["context_messages"] == [] and compressed["context_messages"] != []
    assert not list(srv.session_dir.glob(f"{SID}.json.undo-*"))
    with srv.start():  # a restart brings nothing back: the compression stays undone
        assert srv.get_json(f"/api/session?session_id={SID}")["session"]["can_uncompress"] is False
    assert _on_disk(srv)["context_messages"] == []

"""The fake OpenAI-compatible server: wire format, scripting, errors, hang/release, control API."""

from __future__ import annotations

import http.client
import json
import threading
import time

import openai
import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from talaria_testing.fake_llm import (
    DEFAULT_SUMMARY,
    FakeLLM,
    FakeLLMProcess,
    Reply,
    hermes_config,
    is_summary_request,
    split_tokens,
    write_hermes_config,
)

SUMMARY_PROMPT = "You are a summarization agent creating a context checkpoint. TURNS TO SUMMARIZE: ..."


@pytest.fixture
def llm():
    with FakeLLM() as server:
        yield server


def post(server, path: str, body, *, timeout: float = 10) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=timeout)
    conn.request(
        "POST",
        path,
        body=json.dumps(body),
        headers={"Content-Type": "application/json", "Authorization": "Bearer sk-x"},
    )
    resp = conn.getresponse()
    data = resp.read()
    conn.close()
    return resp.status, data


def get(server, path: str) -> tuple[int, dict]:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    conn.request("GET", path)
    resp = conn.getresponse()
    data = json.loads(resp.read() or b"null")
    conn.close()
    return resp.status, data


def chat(text: str = "hi", *, stream: bool = True, **extra) -> dict:
    body = {"model": "fake-model", "messages": [{"role": "user", "content": text}], **extra}
    if stream:
        body.update(stream=True, stream_options={"include_usage": True})
    return body


def sse_chunks(raw: bytes) -> list:
    """Data payloads of an SSE body, JSON-decoded except the final ``[DONE]``."""
    out = []
    for frame in raw.decode().split("\n\n"):
        for line in frame.splitlines():
            if line.startswith("data: "):
                payload = line[len("data: ") :]
                out.append(payload if payload == "[DONE]" else json.loads(payload))
    return out


def test_streamed_text_arrives_word_by_word_then_finish_usage_and_done(llm):
    llm.script("Hello brave new world")
    status, raw = post(llm, "/v1/chat/completions", chat())
    assert status == 200
    chunks = sse_chunks(raw)
    assert chunks[-1] == "[DONE]"
    usage_chunk, finish_chunk = chunks[-2], chunks[-3]
    assert usage_chunk["choices"] == [] and usage_chunk["usage"]["total_tokens"] > 0
    assert finish_chunk["choices"][0]["finish_reason"] == "stop"
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    words = [c["choices"][0]["delta"]["content"] for c in chunks[1:-3]]
    assert words == ["Hello ", "brave ", "new ", "world"]
    assert {c["object"] for c in chunks[:-1]} == {"chat.completion.chunk"}


def test_streamed_tool_call_arguments_reassemble_to_the_scripted_json(llm):
    args = {"todos": [{"id": "1", "content": "a fairly long task description", "status": "pending"}]}
    llm.script(Reply(tool_calls=[{"id": "call_9", "name": "todo", "arguments": args}]))
    _, raw = post(llm, "/v1/chat/completions", chat())
    deltas = [c["choices"][0] for c in sse_chunks(raw)[:-1] if c["choices"]]
    calls = [t for d in deltas for t in d["delta"].get("tool_calls", [])]
    assert calls[0]["id"] == "call_9" and calls[0]["function"]["name"] == "todo"
    assert json.loads("".join(c["function"]["arguments"] for c in calls)) == args
    assert len(calls) > 2  # arguments arrive in several pieces
    assert deltas[-1]["finish_reason"] == "tool_calls"


def test_plain_json_when_stream_is_absent(llm):
    llm.script(Reply(text="plain answer", tool_calls=[{"name": "todo", "arguments": {"x": 1}}]))
    status, raw = post(llm, "/v1/chat/completions", chat(stream=False))
    body = json.loads(raw)
    assert status == 200 and body["object"] == "chat.completion"
    message = body["choices"][0]["message"]
    assert message["content"] == "plain answer"
    assert json.loads(message["tool_calls"][0]["function"]["arguments"]) == {"x": 1}
    assert body["choices"][0]["finish_reason"] == "tool_calls"
    assert body["usage"]["prompt_tokens"] > 0


def test_queue_is_first_in_first_out_then_echoes_the_last_user_message(llm):
    llm.script("first", {"text": "second"})
    texts = [
        json.loads(post(llm, "/v1/chat/completions", chat(f"q{i}", stream=False))[1])["choices"][0][
            "message"
        ]["content"]
        for i in range(3)
    ]
    assert texts == ["first", "second", "echo: q2"]
    assert llm.pending() == 0


@pytest.mark.parametrize("status", [401, 429, 500])
def test_scripted_error_status_carries_an_openai_error_body(llm, status):
    llm.script(Reply(status=status, error="nope"))
    got, raw = post(llm, "/v1/chat/completions", chat())
    assert got == status
    assert json.loads(raw)["error"]["message"] == "nope"
    assert post(llm, "/v1/chat/completions", chat(stream=False))[0] == 200  # one error, then back to normal


def test_summary_requests_use_their_own_queue_and_a_default(llm):
    llm.script("for the chat")
    llm.script_summary("scripted summary")
    body = chat(SUMMARY_PROMPT, stream=False)
    first = json.loads(post(llm, "/v1/chat/completions", body)[1])["choices"][0]["message"]["content"]
    second = json.loads(post(llm, "/v1/chat/completions", body)[1])["choices"][0]["message"]["content"]
    assert (first, second) == ("scripted summary", DEFAULT_SUMMARY)
    assert llm.pending() == 1
    assert [r["kind"] for r in llm.requests(path="/v1/chat/completions")] == ["summary", "summary"]
    assert is_summary_request(body) and not is_summary_request(chat("please summarise this"))


def test_models_endpoints_report_the_context_length_and_other_paths_404(llm):
    llm.context_length = 65536
    status, listing = get(llm, "/v1/models")
    assert status == 200 and listing["data"][0] == {
        "id": "fake-model",
        "object": "model",
        "owned_by": "fake",
        "context_length": 65536,
    }
    assert get(llm, "/v1/models/other-model")[1]["id"] == "other-model"
    assert get(llm, "/api/v1/models")[0] == 404
    assert post(llm, "/api/show", {"name": "x"})[0] == 404


def test_request_log_keeps_method_path_headers_and_body_but_not_control_calls(llm):
    post(llm, "/v1/chat/completions", chat("logged", stream=False))
    get(llm, "/_control/state")
    (entry,) = llm.requests()
    assert (entry["method"], entry["path"], entry["kind"]) == ("POST", "/v1/chat/completions", "chat")
    assert entry["headers"]["Authorization"] == "Bearer sk-x"
    assert entry["body"]["messages"][0]["content"] == "logged"


def test_request_log_is_complete_under_concurrent_requests(llm):
    threads = [
        threading.Thread(target=post, args=(llm, "/v1/chat/completions", chat(f"c{i}", stream=False)))
        for i in range(16)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(r["body"]["messages"][0]["content"] for r in llm.chat_requests()) == sorted(
        f"c{i}" for i in range(16)
    )


def test_hang_after_blocks_mid_stream_until_released(llm):
    llm.script(Reply(text="one two three", hang_after=1))
    result = {}
    worker = threading.Thread(target=lambda: result.update(raw=post(llm, "/v1/chat/completions", chat())[1]))
    worker.start()
    assert llm.wait_for_hang(5)
    time.sleep(0.3)
    assert worker.is_alive()
    llm.release()
    worker.join(5)
    words = [c["choices"][0]["delta"].get("content") for c in sse_chunks(result["raw"])[1:-3]]
    assert words == ["one ", "two ", "three"]
    assert llm.state()["hanging"] == 0


def test_a_client_that_disconnects_frees_a_hanging_response(llm):
    llm.script(Reply(text="one two", hang_after=1))
    conn = http.client.HTTPConnection("127.0.0.1", llm.port, timeout=5)
    conn.request(
        "POST", "/v1/chat/completions", body=json.dumps(chat()), headers={"Content-Type": "application/json"}
    )
    resp = conn.getresponse()
    assert resp.status == 200 and llm.wait_for_hang(5)
    resp.close()  # drops the socket: the server's next keep-alive ping fails
    conn.close()
    deadline = time.monotonic() + 5
    while llm.state()["hanging"] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert llm.state()["hanging"] == 0


def test_token_delay_spaces_out_tokens(llm):
    llm.script(Reply(text="a b c d e", token_delay=0.05))
    started = time.monotonic()
    post(llm, "/v1/chat/completions", chat())
    assert time.monotonic() - started >= 0.2


def test_the_openai_client_reads_stream_tool_calls_and_errors():
    with FakeLLM() as llm:
        client = openai.OpenAI(base_url=llm.base_url, api_key="sk-test-1234", max_retries=0)
        llm.script(
            "streamed words here",
            Reply(tool_calls=[{"name": "todo", "arguments": {"a": 1}}]),
            Reply(status=429),
        )
        stream = client.chat.completions.create(
            model="fake-model", messages=[{"role": "user", "content": "x"}], stream=True
        )
        assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices) == "streamed words here"
        done = client.chat.completions.create(model="fake-model", messages=[{"role": "user", "content": "x"}])
        assert done.choices[0].message.tool_calls[0].function.name == "todo"
        with pytest.raises(openai.RateLimitError):
            client.chat.completions.create(model="fake-model", messages=[{"role": "user", "content": "x"}])


def test_control_api_scripts_reports_resets_and_configures(llm):
    status, raw = post(
        llm, "/_control/script", {"replies": ["from control", {"status": 500}], "summaries": ["sum"]}
    )
    assert status == 200 and json.loads(raw) == {
        "queued": 2,
        "queued_summaries": 1,
        "hanging": 0,
        "request_count": 0,
    }
    assert (
        json.loads(post(llm, "/v1/chat/completions", chat(stream=False))[1])["choices"][0]["message"][
            "content"
        ]
        == "from control"
    )
    assert post(llm, "/v1/chat/completions", chat())[0] == 500
    assert [r["kind"] for r in get(llm, "/_control/requests")[1]["requests"]] == ["chat", "chat"]
    assert json.loads(post(llm, "/_control/config", {"context_length": 70000})[1])["context_length"] == 70000
    assert get(llm, "/v1/models")[1]["data"][0]["context_length"] == 70000
    assert json.loads(post(llm, "/_control/reset", {})[1]) == {
        "queued": 0,
        "queued_summaries": 0,
        "hanging": 0,
        "request_count": 0,
    }
    assert post(llm, "/_control/script", "not a script")[0] == 400
    assert post(llm, "/_control/nothing", {})[0] == 404


def test_standalone_process_is_scriptable_through_the_control_api(tmp_path):
    with FakeLLMProcess(tmp_path / "port", script=["preloaded"]) as proc:
        proc.script(Reply(text="hang", hang_after=0), summaries=["s"])
        assert proc.state()["queued"] == 2
        conn = http.client.HTTPConnection("127.0.0.1", proc.port, timeout=10)
        conn.request(
            "POST",
            "/v1/chat/completions",
            body=json.dumps(chat(stream=False)),
            headers={"Content-Type": "application/json"},
        )
        assert json.loads(conn.getresponse().read())["choices"][0]["message"]["content"] == "preloaded"
        conn.close()
        assert proc.requests()[0]["body"]["messages"][0]["content"] == "hi"
        assert proc.release()["hanging"] == 0
        assert proc.reset() == {"queued": 0, "queued_summaries": 0, "hanging": 0, "request_count": 0}
    assert proc.proc.returncode == 0


def test_hermes_config_points_the_agent_at_the_server_quietly(tmp_path):
    path = write_hermes_config(
        tmp_path,
        "http://127.0.0.1:1/v1",
        context_length=65536,
        in_place=False,
        extra={"agent": {"max_turns": 3}},
    )
    written = yaml.safe_load(path.read_text())
    assert written == hermes_config(
        "http://127.0.0.1:1/v1", context_length=65536, in_place=False, extra={"agent": {"max_turns": 3}}
    )
    assert written["model"] == {
        "provider": "custom",
        "base_url": "http://127.0.0.1:1/v1",
        "default": "fake-model",
        "api_key": "sk-test-1234",
        "context_length": 65536,
    }
    assert written["agent"] == {"api_max_retries": 1, "environment_probe": False, "max_turns": 3}
    assert written["compression"] == {"in_place": False}
    assert written["memory"] == {"memory_enabled": False, "user_profile_enabled": False}
    assert written["skills"] == {"creation_nudge_interval": 0}


@given(st.text(alphabet=st.sampled_from("ab \n\t"), max_size=40))
def test_split_tokens_joins_back_to_the_text(text):
    pieces = split_tokens(text)
    assert "".join(pieces) == text
    assert all(piece.strip() for piece in pieces[1:])  # only leading whitespace stands alone

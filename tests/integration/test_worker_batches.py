"""A worker sends a turn's tokens in batches (``api.agent.turn_batches``): the real server with one agent worker,
the real agent, a scripted LLM streaming faster than the batch interval. The stream and the saved message hold
every token in order, with the tool's events where the model put them; a stop and a killed worker keep
what had streamed."""

from __future__ import annotations

import os
import signal
import time

import pytest

from talaria_testing.chat_client import (
    SSE,
    chat,
    named,
    names,
    new_session,
    on_disk,
    read_all,
    start,
    text_of,
    tokens_streamed,
)
from talaria_testing.fake_llm import Reply
from talaria_testing.many_turns import worker_pids
from tests.integration.test_approvals import Stream
from tests.integration.test_worker_pool import _server

pytestmark = pytest.mark.integration

WORDS = [f"w{i:03d}" for i in range(240)]
TODO_ARGS = {"todos": [{"id": "1", "content": "count", "status": "in_progress"}]}


@pytest.fixture(scope="module")
def srv(llm, tmp_path_factory):
    # A long interval: text is still held in the worker when the tool starts, or when the stop comes.
    settings = {"TALARIA_AGENT_TOOLSETS": "todo", "TALARIA_TOKEN_BATCH_INTERVAL": "1"}
    with _server(tmp_path_factory.mktemp("batches"), llm.base_url, **settings) as server:
        yield server


def test_fast_tokens_arrive_in_fewer_events_whole_and_in_order_in_the_stream_and_the_saved_turn(srv, fake):
    first = "Counting: " + " ".join(WORDS[:120])
    second = " ".join(WORDS[120:]) + " done."
    thinking = "let me think " * 40
    fake.script(
        Reply(
            text=first,
            reasoning=thinking,
            tool_calls=[{"id": "c1", "name": "todo", "arguments": TODO_ARGS}],
            token_delay=0.001,
        ),
        Reply(text=second, token_delay=0.001),
    )
    sid = new_session(srv)
    stream_id = start(srv, sid, "count for me")
    events = read_all(srv, stream_id)
    assert names(events)[-1] == "done" and not named(events, "error")
    # Gathered: a token event carries many of the model's tokens (one each would be 240 events and more).
    assert len(named(events, "token")) < len(WORDS) / 4
    assert "".join(d["text"] for d in named(events, "reasoning")) == thinking
    # The tool's events sit between the two answers: every token before them is the first answer's.
    tool_at = names(events).index("tool")
    assert text_of(events[:tool_at]) == first, repr(text_of(events[tool_at - 3 : tool_at + 3]))
    assert text_of(events[tool_at:]).lstrip("\n") == second, repr(text_of(events[tool_at:])[:40])
    assert read_all(srv, stream_id, last_event_id=2) == events[2:]  # a reconnect replays the same events
    rows = on_disk(srv, sid)["messages"]
    assert [r["role"] for r in rows] == ["user", "assistant", "tool", "assistant"]
    assert rows[1]["content"] == first and rows[3]["content"] == second


def test_a_stop_keeps_the_text_the_worker_still_held(srv, fake):
    sid = new_session(srv)
    held = " ".join(WORDS[:60])
    fake.script(Reply(text=held + " " + " ".join(WORDS[60:]), token_delay=0.001, hang_after=60))
    stream_id = start(srv, sid, "count slowly")
    stream = Stream(srv, stream_id)
    assert fake.wait_for_hang(60)
    # The agent reads what the model sent (a stop would leave the rest unread), while the worker still
    # holds all but the first word for the interval.
    time.sleep(0.4)
    assert srv.post_json("/api/chat/cancel", {"stream_id": stream_id})["ok"]
    events = stream.finish()
    fake.release()
    assert "cancelled" in names(events)
    assert text_of(events).strip() == held, [(n, d) for _, n, d in events if n != "token"]
    saved = on_disk(srv, sid)
    assert saved["active_stream_id"] is None
    assert saved["messages"][-1]["content"].strip() == held and saved["messages"][-1].get("_cancelled")
    fake.script("after the stop")
    assert text_of(chat(srv, sid, "again")) == "after the stop"


def test_a_worker_killed_mid_batch_ends_the_turn_interrupted_with_what_reached_the_server(
    llm, fake, tmp_path
):
    with _server(tmp_path, llm.base_url) as server:
        sid = new_session(server)
        fake.script(Reply(text=" ".join(WORDS), token_delay=0.002, hang_after=150))
        stream_id = start(server, sid, "go")
        seen = []
        with SSE(server, stream_id, timeout=60) as sse:
            for event in sse:
                seen.append(event)
                if tokens_streamed(seen) >= 50 and worker_pids(server):
                    os.kill(worker_pids(server)[0], signal.SIGKILL)
                    break
        events = read_all(server, stream_id)
        fake.release()
        assert names(events)[-1] == "done" and named(events, "error")
        streamed = text_of(events)
        assert streamed and " ".join(WORDS).startswith(streamed)
        saved = on_disk(server, sid)
        assert saved["active_stream_id"] is None
        assert saved["messages"][-2]["content"] == streamed and saved["messages"][-2].get("_partial")
        assert saved["messages"][-1].get("_interrupted")

"""Many turns through the real server and the real agent in its worker processes (the default), a scripted
LLM that answers at once: 32 turns at the same time each saved whole.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from talaria_testing.chat_client import chat, named, new_session, on_disk, text_of
from talaria_testing.fake_llm import Reply, agent_server
from talaria_testing.fake_llm_server import last_user_text
from tests.integration.test_worker_pool import worker_pids

pytestmark = pytest.mark.integration

WORDS = " ".join(["word"] * 20)
TODO_ARGS = {"todos": [{"id": "1", "content": "write the tests", "status": "pending"}]}


def _tool_then_answer(body: dict) -> Reply:
    """A tool call for a fresh user message, then the answer naming that message, streamed in pieces."""
    asked = last_user_text(body) or ""
    if body["messages"][-1]["role"] == "user":
        call = {"id": f"call_{abs(hash(asked))}", "name": "todo", "arguments": TODO_ARGS}
        return Reply(text="Planning.", tool_calls=[call])
    return Reply(text=f"Answer to {asked}: {WORDS}", token_delay=0.005)


def test_32_turns_at_once_in_the_workers_are_each_saved_whole(llm, fake, tmp_path):
    fake.default_reply = _tool_then_answer
    env = {"TALARIA_SERVER_THREADS": "112", "TALARIA_CHECKPOINT_INTERVAL": "0.2"}
    with agent_server(tmp_path, llm.base_url, toolsets="todo", env=env) as srv:
        sids = [new_session(srv) for _ in range(32)]
        barrier = threading.Barrier(32)

        def turn(sid: str) -> list:
            barrier.wait()
            return chat(srv, sid, f"task {sid}")

        with ThreadPoolExecutor(32) as pool:
            streams = list(pool.map(turn, sids))
        assert len(worker_pids(srv)) == 2  # the default: two worker processes shared the turns
        for sid, events in zip(sids, streams, strict=True):
            assert not named(events, "error"), (sid, named(events, "error"))
            assert text_of(events).endswith(f"Answer to task {sid}: {WORDS}")
            saved = on_disk(srv, sid)
            assert saved["active_stream_id"] is None and not saved.get("pending_user_message")
            rows = saved["messages"]
            assert [m["role"] for m in rows] == ["user", "assistant", "tool", "assistant"], (sid, rows)
            assert rows[0]["content"] == f"task {sid}"
            assert rows[1]["tool_calls"][0]["function"]["name"] == "todo"
            assert rows[2]["tool_call_id"] == rows[1]["tool_calls"][0]["id"]
            assert rows[3]["content"] == f"Answer to task {sid}: {WORDS}"
            assert not any(m.get("_partial") or m.get("_error") for m in rows)

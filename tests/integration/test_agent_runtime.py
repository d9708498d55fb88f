"""The real hermes-agent driven through ``api.agent_runtime`` against the fake LLM server."""

from __future__ import annotations

import threading
import time

import pytest

from api import agent_runtime, config
from talaria_testing.fake_llm import FakeLLM, Reply, write_hermes_config

pytestmark = pytest.mark.integration

MARKER = "[CONTEXT COMPACTION — REFERENCE ONLY]"


class Recorder:
    """A thread-safe on_event sink."""

    def __init__(self):
        self._lock = threading.Lock()
        self.events: list[tuple[str, dict]] = []
        self.first_token = threading.Event()

    def __call__(self, name: str, data: dict) -> None:
        with self._lock:
            self.events.append((name, data))
        if name == "token":
            self.first_token.set()

    def named(self, name: str) -> list[dict]:
        with self._lock:
            return [d for n, d in self.events if n == name]

    def text(self) -> str:
        return "".join(d["text"] for d in self.named("token"))


@pytest.fixture(scope="module")
def llm():
    with FakeLLM() as server:
        yield server


@pytest.fixture
def fake(llm):
    llm.reset()
    llm.context_length = 131072
    write_hermes_config(config.HERMES_HOME, llm.base_url)
    yield llm
    llm.release()


def make_agent(tmp_path, sid="sess_a", toolsets=None):
    return agent_runtime.build_agent(
        sid,
        "fake-model",
        None,
        state_db_path=tmp_path / "state.db",
        enabled_toolsets=toolsets if toolsets is not None else [],
        skip_context_files=True,
        skip_memory=True,
    )


def test_streamed_multi_turn_chat_passes_history_back(fake, tmp_path):
    fake.script(Reply(text="Hello there, how can I help?"), Reply(text="Paris is the capital."))
    agent = make_agent(tmp_path)
    first_events = Recorder()
    first = agent_runtime.run_turn(agent, "hi", [], first_events)
    assert first.completed and not first.failed
    assert first.final_response == "Hello there, how can I help?"
    assert first_events.text() == "Hello there, how can I help?"
    assert len(first_events.named("token")) == 6
    assert not first_events.named("reasoning")  # the reasoning.available echo is dropped
    second_events = Recorder()
    second = agent_runtime.run_turn(agent, "capital of France?", first.messages, second_events)
    assert second.final_response == "Paris is the capital."
    sent = fake.chat_requests()[-1]["body"]["messages"]
    assert [m["role"] for m in sent if m["role"] != "system"] == ["user", "assistant", "user"]
    assert sent[-2]["content"] == "Hello there, how can I help?"
    assert [m["role"] for m in second.messages] == ["user", "assistant", "user", "assistant"]
    assert second.usage["output_tokens"] > 0 and second.last_prompt_tokens > 0
    assert second.context_length == 131072 and second.threshold_tokens == 98304
    assert not second.compressed and second.session_id == "sess_a"
    print("RESULT KEYS", sorted(second.raw))

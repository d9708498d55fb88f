"""The real hermes-agent driven through ``api.agent.agent_runtime`` and ``api.agent.agent_turn`` against the fake LLM server."""

from __future__ import annotations

import sqlite3
import threading
import time

import pytest

from api.agent import agent_runtime, agent_turn
from api.store import config
from talaria_testing.fake_llm import Reply, write_hermes_config

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


_AGENTS: list = []


@pytest.fixture
def fake(llm):
    with llm.fresh():
        llm.context_length = 131072
        write_hermes_config(config.HERMES_HOME, llm.base_url)
        yield llm
    while _AGENTS:
        agent_runtime.close_agent(_AGENTS.pop())


def make_agent(tmp_path, sid="sess_a", toolsets=None):
    agent = agent_runtime.build_agent(
        sid,
        "fake-model",
        None,
        state_db_path=tmp_path / "state.db",
        enabled_toolsets=toolsets if toolsets is not None else [],
        skip_context_files=True,
        skip_memory=True,
    )
    _AGENTS.append(agent)
    return agent


def test_streamed_multi_turn_chat_passes_history_back(fake, tmp_path):
    fake.script(Reply(text="Hello there, how can I help?"), Reply(text="Paris is the capital."))
    agent = make_agent(tmp_path)
    first_events = Recorder()
    first = agent_turn.run_turn(agent, "hi", [], first_events)
    assert first.completed and not first.failed
    assert first.final_response == "Hello there, how can I help?"
    assert first_events.text() == "Hello there, how can I help?"
    assert len(first_events.named("token")) == 6
    assert not first_events.named("reasoning")  # the reasoning.available echo is dropped
    second_events = Recorder()
    second = agent_turn.run_turn(agent, "capital of France?", first.messages, second_events)
    assert second.final_response == "Paris is the capital."
    sent = fake.chat_requests()[-1]["body"]["messages"]
    assert [m["role"] for m in sent if m["role"] != "system"] == ["user", "assistant", "user"]
    assert sent[-2]["content"] == "Hello there, how can I help?"
    assert [m["role"] for m in second.messages] == ["user", "assistant", "user", "assistant"]
    assert second.usage["output_tokens"] > 0 and second.last_prompt_tokens > 0
    assert second.context_length == 131072 and second.threshold_tokens == 98304
    assert not second.compressed and second.session_id == "sess_a"
    agent_runtime.close_agent(agent)
    with sqlite3.connect(f"file:{tmp_path / 'state.db'}?mode=ro", uri=True) as db:
        source, ended_at = db.execute("SELECT source, ended_at FROM sessions WHERE id = 'sess_a'").fetchone()
        rows = db.execute("SELECT role FROM messages WHERE session_id = 'sess_a' ORDER BY id").fetchall()
    assert (source, ended_at) == ("webui", None)  # closing does not end the conversation
    assert [r[0] for r in rows] == ["user", "assistant", "user", "assistant"]


TODO_ARGS = {"todos": [{"id": "1", "content": "write the tests", "status": "pending"}]}


def test_tool_call_turn_reports_tool_events_and_transcript(fake, tmp_path):
    fake.script(
        Reply(text="Let me plan.", tool_calls=[{"id": "call_t1", "name": "todo", "arguments": TODO_ARGS}]),
        Reply(text="Planned one task."),
    )
    agent = make_agent(tmp_path, toolsets=["todo"])
    events = Recorder()
    result = agent_turn.run_turn(agent, "plan my day", [], events)
    assert result.completed and result.final_response == "Planned one task."
    assert events.named("tool") == [{"id": "call_t1", "name": "todo", "args": TODO_ARGS}]
    (done,) = events.named("tool_complete")
    assert done["id"] == "call_t1" and done["name"] == "todo" and done["is_error"] is False
    assert "write the tests" in done["result"]
    assert events.named("interim")[0]["text"] == "Let me plan."
    assert [m["role"] for m in result.messages] == ["user", "assistant", "tool", "assistant"]
    assert result.messages[1]["tool_calls"][0]["function"]["name"] == "todo"
    names = [n for n, _ in events.events]
    assert names.index("tool") < names.index("tool_complete")


@pytest.mark.parametrize("status", [500, 401])
def test_provider_error_ends_the_turn_quickly_with_a_clear_error(fake, tmp_path, status):
    fake.script(*[Reply(status=status, error="upstream exploded")] * 3)
    agent = make_agent(tmp_path)
    started = time.monotonic()
    result = agent_turn.run_turn(agent, "hello?", [], Recorder())
    elapsed = time.monotonic() - started
    assert result.failed and not result.completed
    assert f"HTTP {status}" in result.error and "upstream exploded" in result.error
    assert elapsed < 5


def test_interrupt_mid_stream_returns_partial_text(fake, tmp_path):
    fake.script(Reply(text="one two three four five six", hang_after=2))
    agent = make_agent(tmp_path)
    events = Recorder()
    runner = agent_turn.TurnRunner(agent, "count", [], events).start()
    assert fake.wait_for_hang()
    assert events.first_token.wait(10)
    deadline = time.monotonic() + 10
    while events.text() != "one two " and time.monotonic() < deadline:  # both sent tokens reached us
        time.sleep(0.01)
    started = time.monotonic()
    runner.interrupt()
    result = runner.wait(10)
    assert result is not None, "the turn did not stop"
    assert result.interrupted and time.monotonic() - started < 5
    assert events.text() == "one two "


def test_an_interrupt_right_after_start_is_not_lost_and_the_next_turn_runs(fake, tmp_path):
    fake.script(Reply(text="never streamed", hang_after=0), Reply(text="next turn fine"))
    agent = make_agent(tmp_path)
    runner = agent_turn.TurnRunner(agent, "stop at once", [], Recorder()).start()
    runner.interrupt()
    result = runner.wait(10)
    assert result is not None and result.interrupted
    runner.interrupt()  # late: must not leak into the next turn
    fake.release()
    fake.reset()
    fake.script("next turn fine")
    after = agent_turn.run_turn(agent, "again", [], Recorder())
    assert after.completed and after.final_response == "next turn fine"


def long_history(pairs: int = 25, size: int = 5500) -> list[dict]:
    history = []
    for i in range(pairs):
        history.append({"role": "user", "content": f"Question {i}: " + ("lorem ipsum dolor " * (size // 18))})
        history.append(
            {"role": "assistant", "content": f"Answer {i}: " + ("sit amet consectetur " * (size // 21))}
        )
    return history


def has_marker(messages: list[dict]) -> bool:
    return any(MARKER in text_of(m) for m in messages)


def text_of(message: dict) -> str:
    content = message.get("content")
    return content if isinstance(content, str) else ""


@pytest.mark.parametrize("in_place", [True, False])
def test_automatic_compression_inside_a_turn_is_detected(fake, tmp_path, in_place):
    write_hermes_config(config.HERMES_HOME, fake.base_url, context_length=65536, in_place=in_place)
    fake.script_summary("## Active Task\nNone.\n\n## Goal\nSummarised lorem ipsum.")
    fake.script(Reply(text="Still here after compaction."))
    agent = make_agent(tmp_path, sid=f"sess_c{int(in_place)}")
    events = Recorder()
    history = long_history()
    result = agent_turn.run_turn(agent, "and now?", history, events)
    assert result.completed, result.error
    assert result.final_response == "Still here after compaction."
    assert result.compressed and result.compression_count >= 1
    assert has_marker(result.messages)
    assert len(result.messages) < len(history)
    assert len(fake.summary_requests()) == 1
    assert events.named("compressing")
    assert result.rotated is (not in_place)
    with sqlite3.connect(f"file:{tmp_path / 'state.db'}?mode=ro", uri=True) as db:
        if in_place:  # same id; its active rows are now the compacted context (history we passed included)
            rows = db.execute(
                "SELECT content FROM messages WHERE session_id = ? AND active = 1 ORDER BY id",
                (result.session_id,),
            ).fetchall()
            assert len(rows) == len(result.messages) and any(MARKER in (r[0] or "") for r in rows)
        else:  # a child session continues the old one
            parent = db.execute(
                "SELECT parent_session_id FROM sessions WHERE id = ?", (result.session_id,)
            ).fetchone()
            assert parent == (result.previous_session_id,)


def test_manual_compression_returns_a_list_with_the_marker_row(fake, tmp_path):
    fake.script_summary("## Active Task\nNone.\n\n## Goal\nManual summary of lorem.")
    agent = make_agent(tmp_path, sid="sess_m")
    history = long_history(pairs=12)
    before = [dict(m) for m in history]
    outcome = agent_runtime.compress_messages(agent, history, focus_topic="lorem ipsum")
    assert history == before  # the caller's list is untouched
    assert outcome.changed and not outcome.aborted and not outcome.fallback_summary
    assert isinstance(outcome.messages, list) and len(outcome.messages) < len(history)
    rows = [m for m in outcome.messages if MARKER in text_of(m)]
    assert len(rows) == 1 and "Manual summary of lorem." in rows[0]["content"]
    (request,) = fake.summary_requests()
    assert 'FOCUS TOPIC: "lorem ipsum"' in request["body"]["messages"][0]["content"]
    assert "stream" not in request["body"]


def test_manual_compression_of_a_short_list_changes_nothing(fake, tmp_path):
    agent = make_agent(tmp_path, sid="sess_s")
    short = long_history(pairs=2, size=100)
    outcome = agent_runtime.compress_messages(agent, short)
    assert not outcome.changed and outcome.messages == short
    assert fake.summary_requests() == []


def test_without_a_configured_provider_building_an_agent_says_how_to_configure_one(fake, tmp_path):
    (config.HERMES_HOME / "config.yaml").write_text("agent: {environment_probe: false}\n", encoding="utf-8")
    with pytest.raises(agent_runtime.ProviderNotConfigured) as caught:
        agent_runtime.build_agent(
            "sess_n", "some-model", None, state_db_path=tmp_path / "state.db", enabled_toolsets=[]
        )
    message = str(caught.value)
    assert "config.yaml" in message and "model:" in message and "http://127.0.0.1:11434/v1" in message
    assert caught.value.status == 503

"""``api.agent.agent_turn``: one turn of a scripted agent in a worker thread, summarized as a ``TurnResult``."""

from __future__ import annotations

import threading

import pytest

from api.agent import agent_turn
from api.agent.agent_turn import TurnResult
from talaria_testing.fake_agent import ScriptedAgent, Sink


@pytest.fixture
def sink():
    return Sink()


def test_run_turn_streams_from_agent_threads_and_summarizes_the_result(sink):
    def script(agent, **kw):
        worker = threading.Thread(target=agent.stream_delta_callback, args=("from a worker ",))
        worker.start()
        worker.join()
        agent.stream_delta_callback("and the caller")
        return {
            "final_response": "from a worker and the caller",
            "completed": True,
            "messages": [{"role": "user", "content": "q"}],
            "input_tokens": 10,
            "output_tokens": 5,
            "last_prompt_tokens": 10,
            "api_calls": 1,
        }

    agent = ScriptedAgent(script)
    result = agent_turn.run_turn(
        agent, "q", [{"role": "user", "content": "old"}], sink, persist_timestamp=123.0
    )
    assert [d["text"] for d in sink.named("token")] == ["from a worker ", "and the caller"]
    assert result.completed and not result.failed and result.final_response == "from a worker and the caller"
    assert result.usage == {"input_tokens": 10, "output_tokens": 5, "api_calls": 1}
    assert (result.last_prompt_tokens, result.context_length, result.threshold_tokens) == (10, 65536, 64000)
    assert not result.compressed and not result.rotated
    # persist_user_timestamp is not in this agent's signature, so it is not passed
    assert agent.calls == [
        {
            "user_message": "q",
            "history": [{"role": "user", "content": "old"}],
            "task_id": "sid",
            "persist": "q",
        }
    ]


def test_a_rotated_session_id_is_reported_as_compression(sink):
    def script(agent, **kw):
        agent.session_id = "rotated"
        return {"final_response": "x", "completed": True, "messages": []}

    result = agent_turn.run_turn(ScriptedAgent(script), "q", [], sink)
    assert result.compressed and result.rotated
    assert (result.previous_session_id, result.session_id) == ("sid", "rotated")


def test_a_grown_compression_count_is_reported_as_compression(sink):
    def script(agent, **kw):
        agent.context_compressor.compression_count += 1
        return {"final_response": "x", "completed": True, "messages": []}

    result = agent_turn.run_turn(ScriptedAgent(script), "q", [], sink)
    assert result.compressed and not result.rotated and result.compression_count == 1


def test_an_exception_in_the_agent_becomes_a_failed_result(sink):
    def script(agent, **kw):
        raise RuntimeError("kaput")

    result = agent_turn.run_turn(ScriptedAgent(script), "q", [], sink)
    assert result.failed and not result.completed and result.error == "RuntimeError: kaput"
    assert isinstance(result.to_dict()["rotated"], bool)


def test_interrupt_reaches_the_agent():
    release = threading.Event()

    def script(agent, **kw):
        release.wait(5)
        return {"final_response": "part", "interrupted": True, "messages": []}

    agent = ScriptedAgent(script)
    agent.interrupt = lambda message=None: release.set()
    runner = agent_turn.TurnRunner(agent, "q", [], Sink()).start()
    runner.interrupt()
    result = runner.wait(5)
    assert result is not None and result.interrupted and result.final_response == "part"


def test_turn_result_to_dict_leaves_out_the_raw_result():
    out = TurnResult(final_response="a", raw={"big": 1}).to_dict()
    assert "raw" not in out and out["final_response"] == "a" and out["rotated"] is False


def test_a_turns_usage_is_what_the_agents_running_totals_grew_by():
    before = {"input_tokens": 1000, "output_tokens": 50, "estimated_cost_usd": 0.25, "api_calls": 1}
    raw = {"input_tokens": 3000, "output_tokens": 120, "estimated_cost_usd": 0.75, "api_calls": 3, "other": 9}
    assert agent_turn.turn_usage(raw, before) == {
        "input_tokens": 2000,
        "output_tokens": 70,
        "estimated_cost_usd": 0.5,
        "api_calls": 2,
    }
    assert agent_turn.turn_usage({"input_tokens": 7, "output_tokens": True}, {}) == {"input_tokens": 7}


def test_the_running_totals_are_read_from_the_agents_session_counters():
    class Agent:
        session_input_tokens = 12
        session_estimated_cost_usd = 0.5
        session_api_calls = None

    assert agent_turn.usage_counters(Agent()) == {"input_tokens": 12, "estimated_cost_usd": 0.5}

"""What each turn cost, through the real server and agent: the agent's counters run for the life of a
pooled agent, and a turn's usage is what they grew by during it."""

from __future__ import annotations

import pytest

from talaria_testing.chat_client import chat, new_session, on_disk
from talaria_testing.fake_llm import Reply, agent_server

pytestmark = pytest.mark.integration


def _usage(prompt: int, completion: int) -> dict:
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


@pytest.fixture(scope="module")
def srv(llm, tmp_path_factory):
    with agent_server(tmp_path_factory.mktemp("usage"), llm.base_url) as server:
        yield server


def test_each_answer_keeps_its_own_turns_tokens_and_the_session_their_sum(srv, llm):
    """The second turn of a session reused its agent, whose totals still held the first turn: it was
    counted as both turns together, and the session's totals counted the first turn twice."""
    sid = new_session(srv)
    llm.script(Reply(text="one", usage=_usage(1000, 50)), Reply(text="two", usage=_usage(2000, 70)))
    chat(srv, sid, "first")
    chat(srv, sid, "second")
    answers = [m for m in on_disk(srv, sid)["messages"] if m["role"] == "assistant"]
    assert [(a["usage"]["input_tokens"], a["usage"]["output_tokens"]) for a in answers] == [
        (1000, 50),
        (2000, 70),
    ]

    usage = srv.get_json(f"/api/session/usage?session_id={sid}")
    assert (usage["totals"]["input_tokens"], usage["totals"]["output_tokens"]) == (3000, 120)
    assert [turn["usage"]["input_tokens"] for turn in usage["turns"]] == [1000, 2000]
    assert all(turn["model"] == "fake-model" for turn in usage["turns"])


def test_usage_of_an_unknown_or_hostile_id_is_a_clear_error(srv):
    for sid in ("nope", "../etc"):
        status, data = srv.json("GET", f"/api/session/usage?session_id={sid}")
        assert status in (400, 404) and data["error"]

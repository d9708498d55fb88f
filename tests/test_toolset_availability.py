"""The reason a toolset cannot work, in a person's words, from what the agent's check reports."""

from __future__ import annotations

from api.agent import toolset_availability


def test_a_toolset_missing_one_of_several_keys_names_them():
    reason = toolset_availability.reason_for(
        ["EXA_API_KEY", "TAVILY_API_KEY", "FIRECRAWL_API_URL", "PARALLEL_API_KEY", "X_TOKEN", "Y_SECRET"]
    )
    assert reason == (
        "Not available: it needs a key. Set one of EXA_API_KEY, TAVILY_API_KEY, PARALLEL_API_KEY, X_TOKEN, …"
        " in the agent's .env."
    )


def test_a_toolset_missing_one_key_names_it():
    assert toolset_availability.reason_for(["XAI_API_KEY"]) == (
        "Not available: it needs a key. Set XAI_API_KEY in the agent's .env."
    )


def test_a_toolset_without_named_keys_points_at_the_agents_setup():
    assert "hermes tools" in toolset_availability.reason_for([])
    assert "hermes tools" in toolset_availability.reason_for(["SOME_URL", 3])

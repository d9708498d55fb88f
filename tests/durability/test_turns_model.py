"""Model-based run of chat turns: random outcomes, edits, compressions and restarts on the real server.

The real server and the real hermes-agent run against the fake LLM; ``talaria_testing.turn_model`` picks
each step and checks the session file and the model's request against its model after every one. CI runs
300 steps, the full report (``--durability-full``) 5,000; each seed has its own server and fake LLM, and
two seeds run side by side.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from talaria_testing.fake_llm import FakeLLM, agent_server
from talaria_testing.turn_model import run_steps
from talaria_testing.turn_outcomes import AGENT_CONFIG, SERVER_ENV

pytestmark = pytest.mark.integration

SECTION = "turns_model"


def _run_seed(root: Path, seed: int, steps: int) -> dict:
    with FakeLLM() as fake, agent_server(root, fake.base_url, env=SERVER_ENV, extra=AGENT_CONFIG) as srv:
        return run_steps(srv, fake, seed, steps)


def test_random_turns_edits_compressions_and_restarts_keep_the_model_true(durability, counters, tmp_path):
    seeds, steps_per_seed = (range(1, 11), 500) if durability.full else ((1, 2), 150)
    with ThreadPoolExecutor(max_workers=2) as pool:
        runs = [pool.submit(_run_seed, tmp_path / f"seed-{seed}", seed, steps_per_seed) for seed in seeds]
    failures = []
    for run in runs:  # every seed's figures and every seed's failure, not only the first
        try:
            figures = run.result()
        except AssertionError as exc:
            failures.append(str(exc))
            continue
        for name, value in figures.items():
            counters.add(SECTION, name, value)
        counters.add(SECTION, "seeds")
    assert not failures, "\n\n".join(failures)

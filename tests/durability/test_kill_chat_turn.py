"""SIGKILL during a chat turn (``api.services.streaming`` with a scripted agent): write-ahead, checkpoints, final merge.

After each kill the parent runs what the server runs at startup (``recover_all_sessions_on_startup`` then
``interrupted_turns.recover_interrupted_turns``) and checks: the rows before the turn are untouched; once
``start_turn`` returned the user message is on disk; a finished turn is stored exactly; an unfinished one
ends with the interrupted marker after at most its checkpointed partial answer, never an invented one;
nothing recovery found is destroyed.
"""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import pytest

from api.agent import interrupted_turns
from api.services.session_recovery import recover_all_sessions_on_startup
from talaria_testing import promises
from talaria_testing.crash_child import AFTER_DONE, NEVER, chat_turn_child
from talaria_testing.killing import drop_caches, run_child
from talaria_testing.scenarios import SCENARIOS, bound, build_template, copy_state, files_under

SECTION = "kill_matrix"


def _restart_and_check(root: Path, old_msgs: list, msgs: list, counters) -> list[str]:
    started = any(m[0] == "started" for m in msgs)
    finished = any(m[0] == "done" for m in msgs)
    drop_caches(root)
    pre = files_under(root)
    sessions = root / "sessions"
    result = recover_all_sessions_on_startup(sessions, rebuild_index=True)
    swept = files_under(root)
    with bound(root):
        interrupted_turns.recover_interrupted_turns(sessions)  # a normal (growing) save: it adds the marker
    post = files_under(root)
    out = promises.chat_turn_violations(old_msgs, post, started=started, finished=finished)
    counters.add(SECTION, f"chat_turn_outcome.{promises.chat_turn_outcome(old_msgs, post)}")
    if result["restored"]:
        out.append("P4 recovery restored a backup during a turn (nothing shrank)")
    out += [
        f"P6 recovery destroyed {rel}"
        for rel, data in pre.items()
        if not promises._is_kept_name(rel) and data not in set(swept.values())
    ]
    out += promises.index_violations(sessions)
    return out


@pytest.fixture
def template(tmp_path):
    root = tmp_path / "template"
    build_template(SCENARIOS[0], root, 8)
    old = promises.parse((root / "sessions" / "dur1.json").read_bytes())["messages"]
    return root, old


def test_sigkill_at_every_step_of_a_chat_turn(template, counters, tmp_path):
    root0, old_msgs = template
    dry = tmp_path / "dry"
    copy_state(root0, dry)
    msgs, reached = run_child(chat_turn_child, (str(dry), NEVER), until=lambda m: m[0] == "done")
    assert reached, msgs[-3:]
    n_steps = msgs[-1][1] if msgs[-1][0] == "done" else max(m[1] for m in msgs if m[0] == "step")
    assert n_steps >= 15, f"the turn took only {n_steps} durable steps (no checkpoints?)"
    violations = []
    for stop_at in [*range(1, n_steps + 1), AFTER_DONE]:
        root = tmp_path / f"kill-{stop_at}"
        copy_state(root0, root)
        msgs, reached = run_child(
            chat_turn_child, (str(root), stop_at), until=lambda m: m[0] in ("paused", "done")
        )
        assert reached, f"turn child for step {stop_at} ended early: {msgs[-3:]}"
        steps = [m for m in msgs if m[0] == "step"]
        label = f"{steps[-1][2]} of {steps[-1][3]}" if steps and stop_at != AFTER_DONE else "turn finished"
        where = f"chat turn kill after step {stop_at} ({label})"
        counters.add(SECTION, "kill_points")
        counters.add(SECTION, "kill_points.chat_turn")
        for v in _restart_and_check(root, old_msgs, msgs, counters):
            counters.violation(SECTION, where, v)
            violations.append(f"{where}: {v}")
        shutil.rmtree(root)
    assert not violations, "\n".join(violations[:20])


def test_sigkill_at_random_moments_of_chat_turns(template, durability, counters, tmp_path):
    root0, old_msgs = template
    rng = random.Random(99)
    violations = []
    kills = 100 if durability.full else 20
    for k in range(kills):
        root = tmp_path / f"rk-{k}"
        copy_state(root0, root)
        delay = rng.uniform(0.0, 0.25)
        msgs, reached = run_child(
            chat_turn_child, (str(root), NEVER), until=lambda m: m[0] == "started", delay=delay
        )
        assert reached, msgs[-3:]
        counters.add(SECTION, "kill_points")
        counters.add(SECTION, "kill_points.chat_turn_random")
        for v in _restart_and_check(root, old_msgs, msgs, counters):
            where = f"chat turn random kill {k} ({delay:.3f}s after start)"
            counters.violation(SECTION, where, v)
            violations.append(f"{where}: {v}")
        shutil.rmtree(root)
    assert not violations, "\n".join(violations[:20])

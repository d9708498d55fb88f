"""SIGKILL at every durable step of every write path, and at random moments; promises 1-6 hold after recovery.

A child process runs one operation and pauses right after the step named by ``api.store.atomic.STEP_HOOK``
(temp file created, written, fsynced, replaced, folder fsynced, unlinked, linked aside); the parent kills
it there, drops the folder's cached pages, runs ``recover_all_sessions_on_startup(rebuild_index=True)``
and checks the promises (``talaria_testing.promises``). A last kill point lies after the operation
returned (promise 1: acknowledged means durable).
"""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import pytest

from api.agent import interrupted_turns
from api.services.session_recovery import recover_all_sessions_on_startup
from api.store import atomic
from talaria_testing import promises
from talaria_testing.crash_child import AFTER_DONE, random_ops_child, step_child
from talaria_testing.killing import drop_caches, run_child
from talaria_testing.scenarios import MUTANTS, SCENARIOS, SID, bound, build_template, copy_state, files_under

SECTION = "kill_matrix"


def _reference(scenario, template: Path, root: Path, info: dict) -> tuple[list[str], dict[str, bytes]]:
    """One complete run in this process: the steps it takes and the state it leaves."""
    copy_state(template, root)
    steps: list[str] = []
    with bound(root) as sessions:
        atomic.STEP_HOOK = lambda step, path: steps.append(step)
        try:
            scenario.run(sessions, info)
        finally:
            atomic.STEP_HOOK = None
    return steps, files_under(root)


def _recover_and_check(exp: promises.Expectation, root: Path, *, acknowledged: bool) -> list[str]:
    drop_caches(root)
    pre = files_under(root)
    sessions = root / "sessions"
    result = recover_all_sessions_on_startup(sessions, rebuild_index=True)
    post = files_under(root)
    out = promises.check(exp, pre, post, acknowledged=acknowledged)
    out += [f"recovery error: {e}" for e in result.get("errors", [])]
    out += promises.index_violations(sessions)
    out += promises.spring_back_violations(exp, files_under(root), sessions)
    return out


def _kill_at_every_step(scenario, sizes, counters, tmp_path) -> list[str]:
    violations: list[str] = []
    for n in sizes:
        template = tmp_path / f"template-{n}"
        info = build_template(scenario, template, n)
        steps, new = _reference(scenario, template, tmp_path / f"reference-{n}", info)
        assert steps, f"{scenario.name} took no durable step"
        exp = promises.Expectation(scenario.name, scenario.kind, files_under(template), new)
        assert exp.old_fp != exp.new_fp or scenario.kind == promises.RECOVERY, "the operation changed nothing"
        for stop_at in [*range(1, len(steps) + 1), AFTER_DONE]:
            root = tmp_path / f"kill-{n}-{stop_at}"
            copy_state(template, root)
            want = "paused" if stop_at != AFTER_DONE else "done"
            msgs, reached = run_child(
                step_child, (scenario.name, str(root), info, stop_at), until=lambda m, w=want: m[0] == w
            )
            where = f"{scenario.name} n={n} kill after step {stop_at}/{len(steps)}" + (
                f" ({steps[stop_at - 1]})" if stop_at != AFTER_DONE else " (operation returned)"
            )
            child_steps = [m[2] for m in msgs if m[0] == "step"]
            assert reached, f"{where}: child never got there: {msgs[-3:]}"
            assert child_steps == steps[: len(child_steps)], (
                f"{where}: child took other steps {child_steps} vs {steps}"
            )
            counters.add(SECTION, "kill_points")
            counters.add(SECTION, f"kill_points.{scenario.name}")
            for v in _recover_and_check(exp, root, acknowledged=stop_at == AFTER_DONE):
                counters.violation(SECTION, where, v)
                violations.append(f"{where}: {v}")
            shutil.rmtree(root)
    return violations


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_sigkill_at_every_step_keeps_promises(scenario, durability, counters, tmp_path):
    violations = _kill_at_every_step(scenario, durability.sizes, counters, tmp_path)
    assert not violations, "\n".join(violations[:20])


def test_the_kill_matrix_catches_an_in_place_write(tmp_path):
    from talaria_testing.counters import Counters

    violations = _kill_at_every_step(MUTANTS[0], (8,), Counters(), tmp_path)
    assert any(": P1 " in v for v in violations)


def _random_check(msgs: list, root: Path, initial_digest: str) -> tuple[list[str], str]:
    """Promises for one random-moment kill; returns (violations, the digest the next child starts from)."""
    out: list[str] = []
    errors = [m for m in msgs if m[0] == "error"]
    if errors:
        out.append(f"operation raised in the child: {errors[0][1]}")
    ready = [m for m in msgs if m[0] == "ready"]
    before = ready[0][1] if ready else initial_digest
    if before != initial_digest:
        out.append("the restarted process loaded another transcript than recovery left on disk")
    allowed = {before}
    pending: tuple | None = None
    deliberate_landed = set()
    for m in msgs:
        if m[0] == "intent":
            pending = m
            allowed = {before, *m[3]}
        elif m[0] == "ack":
            _, k, digest, refused = m
            want = before if refused else pending[3][-1]
            if digest != want:
                out.append(
                    f"op {pending[2]} #{k} left a transcript other than its specification (refused={refused})"
                )
            if pending[4] and not refused:
                deliberate_landed.add(digest)
            before, allowed, pending = digest, {digest}, None
    drop_caches(root)
    pre = files_under(root)
    pre_digest = _messages_digest(pre.get(promises.live_rel()))
    if pre_digest not in allowed:
        out.append(
            f"P1/P2 after the kill the transcript is none of the versions the operation could leave ({pending and pending[2]})"
        )
    sessions = root / "sessions"
    result = recover_all_sessions_on_startup(sessions, rebuild_index=True)
    post = files_under(root)
    post_digest = _messages_digest(post.get(promises.live_rel()))
    if result["restored"]:
        out.append(
            f"P4 recovery restored {result['restored']} session(s) although every shrink was deliberate"
        )
    if post_digest != pre_digest:
        out.append("P4 recovery changed the transcript")
    out += [f"P6 {v}" for v in _destroyed(pre, post)]
    out += promises.index_violations(sessions)
    with bound(root):  # then, as the server's startup does, a turn the kill cut short gets its marker
        if interrupted_turns.recover_interrupted_turns(sessions):
            post_digest = _messages_digest(files_under(root).get(promises.live_rel()))
    return out, post_digest


def _messages_digest(data: bytes | None) -> str | None:
    doc = promises.parse(data)
    if not isinstance(doc, dict) or not isinstance(doc.get("messages"), list):
        return None
    return promises._digest(doc["messages"])


def _destroyed(pre: dict, post: dict) -> list[str]:
    remaining = set(post.values())
    return [rel for rel, data in pre.items() if not promises._is_kept_name(rel) and data not in remaining]


def test_sigkill_at_random_moments_of_random_operations(durability, counters, tmp_path):
    root = tmp_path / "random"
    build_template(SCENARIOS[0], root, 8)
    digest = _messages_digest((root / "sessions" / f"{SID}.json").read_bytes())
    rng = random.Random(20240607)
    violations: list[str] = []
    for kill in range(durability.random_kills):
        delay = rng.uniform(0.0, 0.06)
        msgs, reached = run_child(
            random_ops_child, (str(root), 1000 + kill), until=lambda m: m[0] == "ready", delay=delay
        )
        assert reached, f"random child {kill} never became ready: {msgs[-3:]}"
        counters.add(SECTION, "kill_points")
        counters.add(SECTION, "kill_points.random_moment")
        counters.add(SECTION, "random_ops_acknowledged", sum(1 for m in msgs if m[0] == "ack"))
        found, digest = _random_check(msgs, root, digest)
        for v in found:
            counters.violation(SECTION, f"random kill {kill} (seed {1000 + kill}, delay {delay:.4f}s)", v)
            violations.append(f"kill {kill}: {v}")
        # keep the folder from growing without bound: kept-aside copies are checked, then pruned
        for p in (root / "sessions").glob("*.json.*-*"):
            p.unlink()
    assert not violations, "\n".join(violations[:20])

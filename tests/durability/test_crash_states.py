"""Power loss beyond kill -9: every crash state the recorded file-system operations allow keeps promises 1-6.

Each write path runs once in process under ``talaria_testing.fsrecorder``; the log must rebuild the real
final folder exactly (so no write escaped the recorder). ``talaria_testing.crash_states`` then yields
every state a power loss could leave (model in its docstring); each is materialised in a fresh folder,
startup recovery runs, and the promises are checked. After the last operation (the call returned) the
only allowed outcome is the new version.
"""

from __future__ import annotations

import shutil

import pytest

from api.services.session_recovery import recover_all_sessions_on_startup
from talaria_testing import promises
from talaria_testing.crash_states import CrashState, Stats, crash_states, materialise
from talaria_testing.fsrecorder import FsRecorder, replay
from talaria_testing.scenarios import SCENARIOS, bound, build_template, copy_state, files_under, record

SECTION = "crash_states"


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_every_crash_state_keeps_promises(scenario, durability, counters, scratch):
    violations: list[str] = []
    for n in durability.crash_sizes:
        template = scratch / f"template-{n}"
        info = build_template(scenario, template, n)
        rec, final = record(scenario, template, scratch / f"record-{n}", info)
        _dirs, replayed = replay(rec)
        assert replayed == final, (
            f"the recorder missed writes: {sorted(set(replayed.items()) ^ set(final.items()))[:3]}"
        )
        exp = promises.Expectation(scenario.name, scenario.kind, files_under(template), final)
        stats = Stats()
        seen: set[tuple[str, bool]] = set()
        for state in crash_states(rec, stats):
            acknowledged = state.point == len(rec.log)
            if (state.key, acknowledged) in seen:
                continue
            seen.add((state.key, acknowledged))
            dest = scratch / f"state-{len(seen)}"
            materialise(state, dest)
            sessions = dest / "sessions"
            result = recover_all_sessions_on_startup(sessions, rebuild_index=True)
            post = files_under(dest)
            found = promises.check(exp, state.files, post, acknowledged=acknowledged)
            found += [f"recovery error: {e}" for e in result.get("errors", [])]
            found += promises.index_violations(sessions)
            found += promises.spring_back_violations(exp, files_under(dest), sessions)
            where = f"{scenario.name} n={n} crash after op {state.point}/{len(rec.log)}"
            for v in found:
                counters.violation(SECTION, where, v)
                violations.append(f"{where}: {v} | state: {_describe(state)}")
            shutil.rmtree(dest)
        counters.add(SECTION, "states_checked", len(seen))
        counters.add(SECTION, f"states_checked.{scenario.name}", len(seen))
        counters.add(SECTION, "states_generated", stats.generated)
        counters.add(SECTION, "crash_points", stats.points)
        counters.add(SECTION, "fs_ops_recorded", len(rec.log))
        counters.add(SECTION, "impossible_orders_dropped", stats.impossible_orders)
        counters.add(SECTION, "bounded", stats.bounded)
    assert not violations, "\n".join(violations[:20])


def _describe(state: CrashState) -> str:
    return ", ".join(
        f"{rel}[{len(data)}]" for rel, data in sorted(state.files.items()) if not rel.endswith("_index.json")
    )


def test_every_crash_state_of_a_chat_turn_keeps_promises(counters, scratch, monkeypatch):
    """Write-ahead save, checkpoints and the final merge of one turn (scripted agent) under power loss."""
    from api.agent import interrupted_turns, turn_journal
    from api.services import streaming
    from talaria_testing import scripted_turns

    template = scratch / "template"
    build_template(SCENARIOS[0], template, 8)
    old_msgs = promises.parse((template / "sessions" / "dur1.json").read_bytes())["messages"]
    root = scratch / "record"
    copy_state(template, root)
    with bound(root) as sessions:
        scripted_turns.install(monkeypatch)
        with FsRecorder(root) as rec:
            started = streaming.start_turn("dur1", scripted_turns.USER_TEXT)
            acked_at = len(rec.log)
            turn = turn_journal.get_turn(started["stream_id"])
            with turn.cond:
                while not turn.finished:
                    turn.cond.wait(1.0)
        final = files_under(root)
    assert replay(rec)[1] == final, "the recorder missed writes"
    stats = Stats()
    seen: set = set()
    violations: list[str] = []
    for state in crash_states(rec, stats):
        flags = (state.point >= acked_at, state.point == len(rec.log))
        if (state.key, flags) in seen:
            continue
        seen.add((state.key, flags))
        dest = scratch / f"turn-state-{len(seen)}"
        materialise(state, dest)
        sessions = dest / "sessions"
        recover_all_sessions_on_startup(sessions, rebuild_index=True)
        swept = files_under(dest)
        with bound(dest):
            interrupted_turns.recover_interrupted_turns(sessions)
        found = promises.chat_turn_violations(
            old_msgs, files_under(dest), started=flags[0], finished=flags[1]
        )
        remaining = set(swept.values())
        found += [
            f"P6 recovery destroyed {rel}"
            for rel, data in state.files.items()
            if not promises._is_kept_name(rel) and data not in remaining
        ]
        for v in found:
            where = f"chat turn crash after op {state.point}/{len(rec.log)}"
            counters.violation(SECTION, where, v)
            violations.append(f"{where}: {v} | state: {_describe(state)}")
        shutil.rmtree(dest)
    counters.add(SECTION, "states_checked", len(seen))
    counters.add(SECTION, "states_checked.chat_turn", len(seen))
    counters.add(SECTION, "states_generated", stats.generated)
    counters.add(SECTION, "crash_points", stats.points)
    counters.add(SECTION, "fs_ops_recorded", len(rec.log))
    assert not violations, "\n".join(violations[:20])

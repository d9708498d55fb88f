"""A real process switching a message's version is SIGKILLed at every durable step of the switch.

After each kill and a restart (startup recovery, a fresh load) the session shows one whole version, its
transcript and its model context alike, never a mix; the other version is still reachable, and a switch
to it shows it whole. A kill after the switch returned leaves the chosen version (acknowledged = durable).
"""

from __future__ import annotations

import shutil

import pytest

from api.services import session_versions
from api.services.session_recovery import recover_all_sessions_on_startup
from api.store import models
from talaria_testing.crash_child import AFTER_DONE
from talaria_testing.killing import drop_caches, run_child
from talaria_testing.stores import store_on
from talaria_testing.version_switching import FIRST, INDEX, PREFIX, SECOND, SID, build, switch_child


def _texts(rows: list) -> list[str]:
    return [m["content"] for m in rows]


WHOLE = {tuple(_texts(PREFIX + FIRST)): 0, tuple(_texts(PREFIX + SECOND)): 1}


def _restart(folder) -> models.Session:
    drop_caches(folder)
    models.store().sessions.clear()
    models.store().index.forget(folder)
    recover_all_sessions_on_startup(folder, rebuild_index=True)
    return models.Session.load(SID)


def _shown_version(session: models.Session) -> int:
    """Which version the session shows; fails on a mix or on a context that does not follow the transcript."""
    shown = tuple(_texts(session.messages))
    assert shown in WHOLE, f"a mix of versions: {shown}"
    assert _texts(session.context_messages) == list(shown)
    (group,) = session.message_versions
    assert group["index"] == INDEX and group["current"] == WHOLE[shown]
    return WHOLE[shown]


def _steps(template, tmp_path, version: int) -> int:
    """How many durable steps the switch takes (a run to the end in a child)."""
    folder = tmp_path / "count"
    shutil.copytree(template, folder)
    msgs, _ = run_child(switch_child, (str(folder), version, 0), until=lambda m: m[0] == "done")
    return next(m[1] for m in msgs if m[0] == "done")


@pytest.mark.parametrize(("start", "target"), [(1, 0), (0, 1)], ids=["to_longer", "to_shorter"])
def test_a_kill_at_any_step_of_a_version_switch_leaves_one_whole_version(state_dir, tmp_path, start, target):
    build()
    if start == 0:
        session_versions.switch_version(SID, INDEX, 0)
    template = tmp_path / "template"
    shutil.copytree(state_dir, template)
    steps = _steps(template, tmp_path, target)
    assert steps >= 8  # the kept file's write and the session file's write, each in several steps
    seen = set()
    for stop_at in [*range(1, steps + 1), AFTER_DONE]:
        folder = tmp_path / f"kill-{stop_at}"
        shutil.copytree(template, folder)
        _msgs, reached = run_child(
            switch_child, (str(folder), target, stop_at), until=lambda m: m[0] in ("paused", "done")
        )
        assert reached, f"the child never reached step {stop_at}"
        with store_on(folder):
            session = _restart(folder)
            shown = _shown_version(session)
            seen.add(shown)
            if stop_at == AFTER_DONE:
                assert shown == target
            other = 1 - shown
            session_versions.switch_version(SID, INDEX, other)
            assert _shown_version(_restart(folder)) == other
    assert seen == {0, 1}  # kills before the session file's rename and after it

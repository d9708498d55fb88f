"""The app owns the live state of the layers below it and puts it in use; importing a module wires nothing."""

from __future__ import annotations

from api.agent import approvals, clarify, process_cards, turn_journal
from api.server.app import App
from api.services import (
    agent_import,
    compression,
    goal_loop,
    session_feed,
    session_views,
    streaming,
    turn_queue,
)
from api.store import models, tombstones


def test_an_app_puts_its_own_live_state_in_use(app):
    assert turn_journal.TURNS.get() is app.turns
    assert compression.JOBS.get() is app.jobs
    assert approvals.QUESTIONS.get() is app.approvals and approvals.YOLO.get() is app.yolo
    assert clarify.QUESTIONS.get() is app.clarify
    assert process_cards.WATCH.get() is app.process_watch
    assert session_views.AGENT_ROWS.get() is app.agent_rows
    assert agent_import.IMPORT_LOCK.get() is app.import_lock
    assert goal_loop.LOCKS.get() is app.goal_locks
    assert streaming.WORK.get() is app.work
    assert session_feed.changes() is app.feed
    assert models.store() is app.store and tombstones.TOMBSTONES.get() is app.store.tombstones


def test_a_second_app_starts_with_nothing_of_the_first(app):
    app.yolo.add("s1")
    second = App(store=app.store)
    try:
        assert not approvals.yolo("s1")
        assert second.turns is not app.turns and second.feed is not app.feed
    finally:
        second.close()
        second.release()
    assert approvals.yolo("s1") and turn_journal.TURNS.get() is app.turns  # the first app's, in use again


def test_what_follows_a_turn_is_wired_by_the_app_alone(app):
    assert streaming.Work()._turn_end_listeners == []  # noqa: SLF001 - nothing registered at import
    assert app.work._turn_end_listeners == [turn_queue.drain, goal_loop.after_turn]  # noqa: SLF001

"""The app owns the live state of the layers below it and puts it in use; importing a module wires nothing."""

from __future__ import annotations

import pytest

from api.agent import (
    agent_answers,
    agent_pool,
    approvals,
    clarify,
    cron_ticker,
    mcp_servers,
    process_cards,
    turn_journal,
    worker_pool,
)
from api.server.app import App
from api.services import (
    agent_import,
    agent_watch,
    compression,
    environment_check,
    environment_workers,
    goal_loop,
    search_indexer,
    session_feed,
    session_views,
    streaming,
    turn_queue,
)
from api.store import atomic, models, session_store, state_db, tombstones


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
    assert agent_pool.AGENTS.get() is app.agents and worker_pool.POOL.get() is app.workers
    assert environment_workers.POOLS.get() is app.environment_pools
    assert environment_check.REACHED.get() is app.reached and search_indexer.INDEXING.get() is app.indexing
    assert mcp_servers.DISCOVERY.get() is app.discovery and cron_ticker.TICKER.get() is app.cron_ticker
    assert agent_watch.WATCH.get() is app.agent_watch and search_indexer.INDEXING.get() is app.indexing
    assert agent_answers.ANSWERS.get() is app.agent_answers
    assert state_db.READS.get() is app.store.agent_db and atomic.SWEPT.get() is app.store.swept


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


def test_each_app_keeps_what_its_agent_answered(app, monkeypatch):
    from api.agent import agent_runtime, toolset_availability

    asked = []
    monkeypatch.setattr(agent_runtime, "config_stamp", lambda: "stamp")
    monkeypatch.setattr(toolset_availability, "_ask_the_agent", lambda: asked.append(1) or {"web": "no key"})
    assert toolset_availability.unavailable_reasons() == {"web": "no key"}
    assert toolset_availability.unavailable_reasons() == {"web": "no key"} and len(asked) == 1  # kept
    second = App(store=app.store)
    try:
        assert second.agent_answers.toolsets == {}
        assert toolset_availability.unavailable_reasons() == {"web": "no key"} and len(asked) == 2
    finally:
        second.close()
        second.release()
    assert app.agent_answers.toolsets == {"stamp": {"web": "no key"}}


def _processes(app):
    return [
        app.agents,
        app.workers,
        app.environment_pools,
        app.reached,
        app.discovery,
        app.cron_ticker,
        app.indexing,
    ]


def test_two_apps_hold_their_own_pools_discovery_and_ticker_and_release_puts_the_first_ones_back(app):
    second = App(store=app.store)
    try:
        assert all(
            mine is not theirs for mine, theirs in zip(_processes(app), _processes(second), strict=True)
        )
        assert second.agent_watch is not app.agent_watch
        assert worker_pool.POOL.get() is second.workers and mcp_servers.DISCOVERY.get() is second.discovery
        assert cron_ticker.TICKER.get() is second.cron_ticker and agent_pool.AGENTS.get() is second.agents
        assert environment_workers.POOLS.get() is second.environment_pools
    finally:
        second.close()
        second.release()
    assert worker_pool.POOL.get() is app.workers and mcp_servers.DISCOVERY.get() is app.discovery
    assert cron_ticker.TICKER.get() is app.cron_ticker and agent_pool.AGENTS.get() is app.agents
    assert (
        environment_workers.POOLS.get() is app.environment_pools
        and agent_watch.WATCH.get() is app.agent_watch
    )
    assert environment_check.REACHED.get() is app.reached and search_indexer.INDEXING.get() is app.indexing


def test_a_stopped_apps_environment_pools_refuse_a_new_pool_and_leave_the_next_apps_alone(app):
    second = App(store=app.store)
    try:
        second.environment_pools.stop_all()
        with pytest.raises(RuntimeError):
            environment_workers.pool_for("box", {"backend": "ssh"})
    finally:
        second.close()
        second.release()
    pool = environment_workers.pool_for("box", {"backend": "ssh"})  # the first app's: not stopped
    assert app.environment_pools.pids() == {"box": []}  # a pool starts its workers on its first turn
    environment_workers.forget("box")
    assert pool.pids() == []


def test_what_follows_a_turn_is_wired_by_the_app_alone(app):
    assert streaming.Work()._turn_end_listeners == []  # noqa: SLF001 - nothing registered at import
    listeners = app.work._turn_end_listeners  # noqa: SLF001
    assert [(heard.func, heard.keywords) for heard in listeners] == [  # each hears with its app's objects
        (turn_queue.drain, {"work": app.work, "turns": app.turns, "store": app.store}),
        (
            goal_loop.after_turn,
            {
                "locks": app.goal_locks,
                "work": app.work,
                "turns": app.turns,
                "store": app.store,
                "workers": app.workers,
            },
        ),
    ]


def test_a_released_app_leaves_its_store_asking_the_turns_in_use(tmp_path):
    previous = session_store.in_use()
    kept = session_store.Store(tmp_path, models.Session)
    app = App(store=kept)
    try:
        assert kept.turn_is_live is not None and not kept.turn_is_live("s1")
    finally:
        app.close()
        app.release()
        session_store.use(previous)
    assert kept.turn_is_live is None

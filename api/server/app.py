"""The application: the settings in force, the session store, login, and the background work around them.

``App()`` is built once where the server is made (``api.server.cli.main``) and handed to the server, whose request
handler passes it to the routes (``handler.server.app``). The app owns the live state of the layers below: its
turns, jobs, questions, feed and locks, its idle agents and worker pools, MCP discovery, cron scheduler and watch
of the agent, each a small object built here and put in use (``api.store.in_use``) for code that holds no app
reference, as its store becomes the store in use, the one hermes-webui's module-level names
(``api.models.SESSION_DIR``...) act on. Building it also wires, explicitly and only here, what follows a save
(the sidebar feed and the search indexer hear every change of the store's index) and a turn's end (the queue,
then the goal loop); importing a module registers nothing. ``start`` starts the background services,
``stop_work`` ends them before the last requests finish, ``close`` keeps what memory holds that the files lack,
and ``release`` puts back what was in use before (a test's app).
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Mapping
from typing import Any

from api.agent import (
    agent_answers,
    agent_pool,
    approvals,
    clarify,
    cron_ticker,
    mcp_servers,
    model_catalog,
    process_cards,
    turn_journal,
    worker_pool,
)
from api.agent.questions import Questions
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
from api.store import config, models
from api.store import session_store as _store
from api.store.in_use import InUse
from api.web.auth import AuthManager


class App:
    """One running Talaria: its settings, its store, its login, its startup's recovery summary and services."""

    def __init__(
        self, settings: Mapping[str, Any] | None = None, *, store: _store.Store[models.Session] | None = None
    ) -> None:
        if settings is not None:
            config.configure(settings)
        self.settings = config.SETTINGS_VALUES
        self.store = store if store is not None else _store.Store(config.sessions_folder(), models.Session)
        self.auth: AuthManager | None = None  # None: login is off
        self.startup_recovery: dict[str, Any] | None = None
        self.started_at = time.time()
        # The live state below is this app's; a second app (a test's) gets its own.
        self._replaced: list[tuple[InUse[Any], Any]] = []  # what was in use before, for ``release``
        self.turns = turn_journal.LiveTurns()
        self._put(turn_journal.TURNS, self.turns)
        self.store.turn_is_live = self._turn_is_live  # the sidebar row says "streaming" for this app's turns
        self.jobs = compression.Jobs()
        self._put(compression.JOBS, self.jobs)
        self.approvals = Questions("approval")  # open approval questions
        self._put(approvals.QUESTIONS, self.approvals)
        self.yolo: set[str] = set()  # sessions whose person turned "don't ask again" on
        self._put(approvals.YOLO, self.yolo)
        self.clarify = Questions("clarify")  # open clarify questions
        self._put(clarify.QUESTIONS, self.clarify)
        self.process_watch = process_cards.ProcessWatch()  # background processes outliving their turn
        self._put(process_cards.WATCH, self.process_watch)
        self.agent_rows = session_views.AgentRows(
            self.store
        )  # the agent's sessions the first page showed last
        self._put(session_views.AGENT_ROWS, self.agent_rows)
        self.import_lock = threading.Lock()  # one continuation of an agent's conversation at a time
        self._put(agent_import.IMPORT_LOCK, self.import_lock)
        self.goal_locks = goal_loop.GoalLocks()
        self._put(goal_loop.LOCKS, self.goal_locks)
        self.feed = session_feed.new_log()  # the sidebar's change feed
        self._put(session_feed.CHANGES, self.feed)
        self.agent_answers = (
            agent_answers.AgentAnswers()
        )  # the agent's costly answers, until its config changes
        self._put(agent_answers.ANSWERS, self.agent_answers)
        self.agents = agent_pool.IdleAgents()  # agents kept between turns run in this process
        self._put(agent_pool.AGENTS, self.agents)
        self.workers = worker_pool.WorkerPool()  # the agent worker processes (``agent_workers``)
        self._put(worker_pool.POOL, self.workers)
        self.environment_pools = environment_workers.EnvironmentPools()  # the workers of each environment
        self._put(environment_workers.POOLS, self.environment_pools)
        self.reached = environment_check.Reached()  # when each environment last answered
        self._put(environment_check.REACHED, self.reached)
        # A turn's thread is given these when it starts (``streaming.TurnParts``): it reaches no slot in use.
        parts = streaming.TurnParts(
            store=self.store,
            workers=self.workers,
            agents=self.agents,
            environment_pools=self.environment_pools,
            process_watch=self.process_watch,
            reached=self.reached,
            approvals=self.approvals,
            clarify=self.clarify,
            yolo=self.yolo,
        )
        self.work = streaming.Work(parts)
        # Each hears with this app's objects; the goal loop after the queue: a queued message goes first.
        self.work.on_turn_end(
            functools.partial(turn_queue.drain, work=self.work, turns=self.turns, store=self.store)
        )
        after_turn = functools.partial(
            goal_loop.after_turn,
            locks=self.goal_locks,
            work=self.work,
            turns=self.turns,
            store=self.store,
            workers=self.workers,
        )
        self.work.on_turn_end(after_turn)
        self._put(streaming.WORK, self.work)
        self.discovery = mcp_servers.Discovery()  # the MCP servers' tools
        self._put(mcp_servers.DISCOVERY, self.discovery)
        self.cron_ticker = cron_ticker.CronTicker()  # the scheduler child
        self._put(cron_ticker.TICKER, self.cron_ticker)
        self.agent_watch = agent_watch.AgentWatch()  # the agent's own sessions as it writes them
        self._put(agent_watch.WATCH, self.agent_watch)
        self.store.index.add_listener(self.feed.record, self.feed.reset)
        self.indexing = search_indexer.Indexing()  # the search index kept true to the files, once started
        self._put(search_indexer.INDEXING, self.indexing)
        self.store.index.add_listener(self.indexing.note_changed, self.indexing.note_reset)
        _store.use(self.store)

    def _turn_is_live(self, session_id: str) -> bool:
        return self.turns.live_turn_for(session_id) is not None

    def _put(self, slot: InUse[Any], value: Any) -> None:
        self._replaced.append((slot, slot.use(value)))

    def release(self) -> None:
        """Put back what was in use before this app was built (a test's app, once it is closed)."""
        while self._replaced:
            slot, previous = self._replaced.pop()
            slot.use(previous)
        if (
            self.store.turn_is_live == self._turn_is_live
        ):  # a store that outlives its app asks the turns in use
            self.store.turn_is_live = None

    def start(self) -> None:
        """The background services, after startup recovery: the search index checked against the files, the
        model list and the agent warmed, MCP servers discovered, the agent's own sessions and cron watched."""
        self.indexing.start(self.store.session_dir, config.STATE_DIR / "search.db")
        # The model picker's list and the agent's config modules are ready before the first page asks.
        threading.Thread(
            target=model_catalog.warm_up, args=(self.agent_answers,), name="warm-up", daemon=True
        ).start()
        if self.settings["warm_up"] and self.settings["agent_workers"]:
            self.workers.warm_up()  # the workers import the agent and build the latest session's agent
        elif self.settings["warm_up"]:
            self.agents.start_warm_up(agent_pool.latest_spec)
        self.discovery.start()
        self.agent_watch.start(store=self.store, feed=self.feed, agent_rows=self.agent_rows)
        self.cron_ticker.start()

    def stop_work(self) -> None:
        """End what runs besides the requests: feeds, live turns (marked interrupted), workers, MCP servers, cron."""
        self.feed.close()  # the sidebar feeds end; the tabs reconnect to the next server
        self.agent_watch.stop()
        try:
            streaming.shutdown(work=self.work, turns=self.turns, store=self.store)
        except Exception:  # noqa: BLE001
            streaming.log.exception("stopping live turns failed")
        self.workers.stop()  # after the turns settled: no agent worker outlives the server
        self.environment_pools.stop_all()
        self.discovery.stop()  # the MCP servers' processes end with their connections
        self.cron_ticker.stop()  # the scheduler child ends; a job it was running is marked interrupted

    def close(self) -> None:
        """Keep what memory holds that the files lack (the sidebar index); stop the search indexer."""
        self.store.close()
        self.indexing.stop()

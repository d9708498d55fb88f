"""What surrounds the turns of one app (``Work``): whether it is shutting down, who hears that a turn ended, and
the app's objects a turn's thread acts on (``TurnParts``), given when the turn starts so the thread reaches no
slot in use."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass

from api.agent import agent_pool, approvals, clarify, process_cards, worker_pool
from api.agent.questions import Questions
from api.agent.turn_journal import Turn
from api.services import environment_check, environment_workers
from api.store import models
from api.store.in_use import InUse

log = logging.getLogger("talaria.streaming")


@dataclass(frozen=True)
class TurnParts:
    """The app's objects a turn's thread uses: its session store, agent worker processes, idle agents, each
    environment's workers, the watch of background processes, when each environment last answered, and its
    open approvals and clarify questions and "don't ask again" switches."""

    store: models.Store
    workers: worker_pool.WorkerPool
    agents: agent_pool.IdleAgents
    environment_pools: environment_workers.EnvironmentPools
    process_watch: process_cards.ProcessWatch
    reached: environment_check.Reached
    approvals: Questions
    clarify: Questions
    yolo: set[str]

    @property
    def asking(self) -> tuple[Questions, Questions, set[str]]:
        """The questions and switches the agent's approvals and questions go through (``turn_scope``)."""
        return self.approvals, self.clarify, self.yolo

    @classmethod
    def in_use(cls) -> TurnParts:
        """The objects in use, read once: what a turn started with no app acts on (hermes-webui's way)."""
        return cls(
            store=models.store(),
            workers=worker_pool.POOL.get(),
            agents=agent_pool.AGENTS.get(),
            environment_pools=environment_workers.POOLS.get(),
            process_watch=process_cards.WATCH.get(),
            reached=environment_check.REACHED.get(),
            approvals=approvals.QUESTIONS.get(),
            clarify=clarify.QUESTIONS.get(),
            yolo=approvals.YOLO.get(),
        )


class Work:
    """What surrounds the turns of one app: whether it is shutting down (no turn starts, no listener runs), who
    hears that a turn ended, and the app's objects its turns act on (``parts``; None: those in use at each
    turn's start). The app builds one (``App.work``), adds its listeners (the queue, the goal loop) and puts it
    in use; importing a module registers nothing."""

    def __init__(self, parts: TurnParts | None = None) -> None:
        self.shutting_down = threading.Event()
        self._parts = parts
        self._turn_end_listeners: list[Callable[[str], object]] = []

    def parts(self) -> TurnParts:
        """The objects a turn starting now acts on: the app's, else those in use."""
        return self._parts if self._parts is not None else TurnParts.in_use()

    def on_turn_end(self, listener: Callable[[str], object]) -> None:
        """Call ``listener(session_id)`` once each turn has ended and been saved (not while shutting down), in
        the order added: the queue (``api.services.turn_queue``) sends its next message from here, with or
        without a tab open."""
        self._turn_end_listeners.append(listener)

    def turn_ended(self, turn: Turn) -> None:
        if self.shutting_down.is_set():
            return
        for listener in list(self._turn_end_listeners):
            try:
                listener(turn.session_id)
            except Exception:  # noqa: BLE001 - the turn is saved; what follows it reports its own failure
                log.exception("after the turn %s in %s", turn.stream_id, turn.session_id)


WORK: InUse[Work] = InUse(Work)  # the app's (``App.work``), else one built on first use

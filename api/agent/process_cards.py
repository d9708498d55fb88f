"""Background processes a turn started, followed on their cards until they exit (``api.rules.work_cards``).

The agent's terminal tool with ``background: true`` registers the process in the agent's own process
registry; this module reads that registry (read only: no poll bookkeeping of the agent's is touched).
While the turn runs, each check refreshes the turn's running process cards as ``work`` events; after it,
one watcher thread follows the processes still running and saves each card's final state, once it exits,
on the row of the session file that holds it (without touching ``updated_at``: not activity).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING, Any

from api.agent import agent_calls, worker_pool
from api.rules import work_cards
from api.rules.errors import NotFound
from api.store import models, session_edit
from api.store.in_use import InUse

if TYPE_CHECKING:  # the type only: the journal is handed in
    from api.agent.turn_journal import Turn

log = logging.getLogger("talaria.process_cards")

WATCH_INTERVAL_S = 1.0

# The store holding a watched process's session and the workers asked about it (None: those in use).
_Held = tuple["models.Store | None", "worker_pool.WorkerPool | None"]


def state_of(proc_id: str, pool: worker_pool.WorkerPool | None = None) -> dict[str, Any] | None:
    """``{exited, exit_code, output}`` of a background process, or None when no agent's registry has it:
    asked of every worker process (the one whose turn started it holds it), or of the agent here."""
    if not worker_pool.enabled():
        return agent_calls.process_state(proc_id)
    found = [
        state
        for state in worker_pool.POOL.get(pool).call_each("process_state", {"proc_id": proc_id})
        if state
    ]
    return found[0] if found else None


def _running(cards: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [c for c in cards if c.get("kind") == "process" and c.get("status") == "running"]


def refresh(turn: Turn, *, pool: worker_pool.WorkerPool | None = None) -> None:
    """The turn's running process cards as the registry (of ``pool``'s workers, the turn's app's) says they
    are now (a ``work`` event per change)."""
    for card in _running(list(turn.work_cards.values())):
        now = time.time()
        updated = work_cards.process_update(card, state_of(card["id"], pool), now)
        if {k: v for k, v in updated.items() if k != "ended_at"} != {
            k: v for k, v in card.items() if k != "ended_at"
        }:
            turn.append("work", updated)


class ProcessWatch:
    """The background processes one app follows after their turn ended (process id → its session and card as
    last saved), and the one thread that follows them. The app owns one (``App.process_watch``), put in use."""

    def __init__(self) -> None:
        # Each process's session and card, with the store holding the session and the workers asked about it.
        self._watched: dict[str, tuple[str, dict[str, Any], _Held]] = {}
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    def watch_after(
        self, turn: Turn, *, store: models.Store | None = None, workers: worker_pool.WorkerPool | None = None
    ) -> None:
        """Follow the turn's process cards still running once it ended, until each exits (asking ``workers``,
        saving into ``store``: the turn's app's; those in use when None)."""
        cards = _running(list(turn.work_cards.values()))
        if not cards:
            return
        with self._lock:
            for card in cards:
                self._watched[card["id"]] = (turn.session_id, card, (store, workers))
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._watch_loop, name="process-cards", daemon=True)
                self._thread.start()
        self._wake.set()

    def _watch_loop(self) -> None:
        while True:
            self._wake.wait(WATCH_INTERVAL_S)
            self._wake.clear()
            with self._lock:
                watched = list(self._watched.items())
            for proc_id, (session_id, card, (store, workers)) in watched:
                updated = work_cards.process_update(card, state_of(proc_id, workers), time.time())
                if updated["status"] == "running":
                    continue
                try:
                    _save_final(session_id, updated, store)
                except Exception:  # noqa: BLE001 - the card stays as last saved; the process is not watched again
                    log.exception("saving the card of process %s in %s failed", proc_id, session_id)
                with self._lock:
                    self._watched.pop(proc_id, None)


WATCH: InUse[ProcessWatch] = InUse(ProcessWatch)  # the app's (``App.process_watch``), else built on first use


def watch_after(turn: Turn) -> None:
    """Follow the turn's process cards still running once it ended, until each exits."""
    WATCH.get().watch_after(turn)


def _save_final(session_id: str, card: dict[str, Any], store: models.Store | None) -> None:
    try:
        with session_edit.edit(session_id, touch_updated_at=False, store=store) as session:
            for index, row in enumerate(session.messages):
                cards = row.get(work_cards.ROW_KEY) if isinstance(row, dict) else None
                if isinstance(cards, list) and any(
                    isinstance(c, dict) and c.get("id") == card["id"] for c in cards
                ):
                    replaced = [
                        card if isinstance(c, dict) and c.get("id") == card["id"] else c for c in cards
                    ]
                    session.messages[index] = {**row, work_cards.ROW_KEY: replaced}
                    return
            raise session_edit.Unchanged  # the row is gone (undone, cleared): nothing to update
    except NotFound:
        return

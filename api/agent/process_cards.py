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
from api.store import session_edit

if TYPE_CHECKING:  # the type only: the journal is handed in
    from api.agent.turn_journal import Turn

log = logging.getLogger("talaria.process_cards")

WATCH_INTERVAL_S = 1.0
_WATCHED: dict[str, tuple[str, dict[str, Any]]] = {}  # process id → (session id, its card as last saved)
_LOCK = threading.Lock()
_WAKE = threading.Event()
_THREAD: threading.Thread | None = None


def state_of(proc_id: str) -> dict[str, Any] | None:
    """``{exited, exit_code, output}`` of a background process, or None when no agent's registry has it:
    asked of every worker process (the one whose turn started it holds it), or of the agent here."""
    if not worker_pool.enabled():
        return agent_calls.process_state(proc_id)
    found = [state for state in worker_pool.POOL.call_each("process_state", {"proc_id": proc_id}) if state]
    return found[0] if found else None


def _running(cards: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [c for c in cards if c.get("kind") == "process" and c.get("status") == "running"]


def refresh(turn: Turn) -> None:
    """The turn's running process cards as the registry says they are now (a ``work`` event per change)."""
    for card in _running(list(turn.work_cards.values())):
        now = time.time()
        updated = work_cards.process_update(card, state_of(card["id"]), now)
        if {k: v for k, v in updated.items() if k != "ended_at"} != {
            k: v for k, v in card.items() if k != "ended_at"
        }:
            turn.append("work", updated)


def watch_after(turn: Turn) -> None:
    """Follow the turn's process cards still running once it ended, until each exits."""
    global _THREAD
    cards = _running(list(turn.work_cards.values()))
    if not cards:
        return
    with _LOCK:
        for card in cards:
            _WATCHED[card["id"]] = (turn.session_id, card)
        if _THREAD is None or not _THREAD.is_alive():
            _THREAD = threading.Thread(target=_watch_loop, name="process-cards", daemon=True)
            _THREAD.start()
    _WAKE.set()


def _watch_loop() -> None:
    while True:
        _WAKE.wait(WATCH_INTERVAL_S)
        _WAKE.clear()
        with _LOCK:
            watched = list(_WATCHED.items())
        for proc_id, (session_id, card) in watched:
            updated = work_cards.process_update(card, state_of(proc_id), time.time())
            if updated["status"] == "running":
                continue
            try:
                _save_final(session_id, updated)
            except Exception:  # noqa: BLE001 - the card stays as last saved; the process is not watched again
                log.exception("saving the card of process %s in %s failed", proc_id, session_id)
            with _LOCK:
                _WATCHED.pop(proc_id, None)


def _save_final(session_id: str, card: dict[str, Any]) -> None:
    try:
        with session_edit.edit(session_id, touch_updated_at=False) as session:
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

"""The ``/goal`` loop of a session, run by the server: a standing goal the agent works toward turn after turn
until its judge says done, the person pauses or clears it, or the turn budget runs out.

- ``command(session_id, args)`` is the agent's ``/goal`` with its subcommands (``status``, ``pause``,
  ``resume``, ``clear``; any other text sets the goal and sends it as the next message).
- After each turn of the session (``after_turn``, which the app adds to ``streaming.Work.on_turn_end``) the agent's
  ``GoalManager`` judges the last answer in a worker process, where the agent's model calls and background
  processes are (the side call ``judge_goal``, ``api.agent.agent_calls``); a judge that cannot be asked pauses
  the goal, saying so. While it says continue, its continuation prompt goes through the session's queue
  (``api.services.turn_queue``), so the next turn starts from the server, durably, and every tab sees it. A turn
  the person stopped, or that ended without an answer, pauses the goal with the reason instead.
- The goal's card (``work`` event of kind ``goal``) is sent to the live turn and saved on the newest answer
  row, so a reload or a restart shows it as last judged.
- After a restart, a goal whose turn the restart cut short is paused (``after_restart``); a continuation
  already queued runs with the queue.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from typing import Any

from api.agent import agent_goals, agent_runtime, turn_journal, worker_pool
from api.agent.turn_journal import LiveTurns
from api.rules import work_cards
from api.rules.errors import ApiError, BadRequest, Conflict, NotFound
from api.rules.session_fields import message_text
from api.services import streaming, turn_queue
from api.store import models, session_edit
from api.store.in_use import InUse

log = logging.getLogger("talaria.goal_loop")

ARGS_MAX_CHARS = 20_000
STOPPED_REASON = "stopped by the person"
NO_ANSWER_REASON = "the turn ended without an answer"
RESTART_REASON = "Talaria restarted during a goal turn"
JUDGE_LOST_REASON = "the judge could not be asked"


class GoalLocks:
    """One lock per session's goal in one app, so a command and a turn's judgement never change it at once.
    The app builds one (``App.goal_locks``) and puts it in use."""

    def __init__(self) -> None:
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()

    def __call__(self, session_id: str) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(session_id, threading.Lock())


LOCKS: InUse[GoalLocks] = InUse(GoalLocks)  # the app's (``App.goal_locks``), else one built on first use


def _messages(session_id: str, store: models.Store | None) -> list[dict[str, Any]]:
    with session_edit.lock(session_id, store=store):
        try:
            return [m for m in models.get_session(session_id, store=store).messages if isinstance(m, dict)]
        except KeyError as exc:
            raise NotFound("No such session") from exc


def last_turn(messages: list[dict[str, Any]]) -> tuple[str, bool]:
    """The last turn's answer text and whether it was stopped (by the person or a restart)."""
    start = next((i for i in range(len(messages) - 1, -1, -1) if messages[i].get("role") == "user"), -1)
    rows = messages[start + 1 :]
    stopped = any(row.get("_cancelled") or row.get("_interrupted") for row in rows)
    answers = [message_text(row) for row in rows if row.get("role") == "assistant" and not row.get("_error")]
    answer = next((text for text in reversed(answers) if text.strip()), "")
    return answer, stopped


def _publish(
    session_id: str,
    card: dict[str, Any],
    move: bool = True,
    turns: LiveTurns | None = None,
    store: models.Store | None = None,
) -> None:
    """The card to the live turn among ``turns`` (every tab following it) and, with ``move``, onto the newest
    answer row on disk (a save that every open tab's session feed sees); without, off the rows that held it: the
    live turn holds it now and saves it with its answer."""
    live = turn_journal.TURNS.get(turns).live_turn_for(session_id)
    if live is not None and not live.finished:
        live.append("work", card)
    try:
        with session_edit.edit(session_id, store=store) as session:
            changed = (
                work_cards.moved_to_last_answer(session.messages, card)
                if move
                else work_cards.without_card(session.messages, card["id"])
            )
            if not changed:
                raise session_edit.Unchanged
    except NotFound:
        return


def _answer(mgr: Any, message: str, stream_id: str | None = None) -> dict[str, Any]:
    state = mgr.state
    answer: dict[str, Any] = {
        "message": message,
        "goal": agent_goals.card(mgr.session_id, state) if state is not None else None,
    }
    if stream_id:
        answer["stream_id"] = stream_id
    return answer


def _continue(
    session_id: str,
    prompt: str | None,
    card: dict[str, Any],
    turns: LiveTurns | None = None,
    work: streaming.Work | None = None,
    store: models.Store | None = None,
) -> str | None:
    """Send ``prompt`` as the session's next message (queued behind a live turn); the turn now running."""
    if not prompt:
        return None
    sent = turn_queue.send(session_id, prompt, "queue", work=work, turns=turns, store=store)
    started = sent.get("stream_id")
    _publish(session_id, card, move=started is None, turns=turns, store=store)
    return started if isinstance(started, str) else None


def _has_state(mgr: Any) -> bool:
    """A goal set and not cleared (active, paused or done)."""
    return mgr.state is not None and mgr.state.status != "cleared"


NO_GOAL_TEXT = "No goal is set in this session; set one with /goal <text>."
NO_GOAL_STATUS = "No active goal. Set one with /goal <text>."  # the agent's own status line without one


def command(
    session_id: str,
    args: Any,
    *,
    locks: GoalLocks | None = None,
    work: streaming.Work | None = None,
    turns: LiveTurns | None = None,
    store: models.Store | None = None,
) -> dict[str, Any]:
    """The agent's ``/goal [text|status|pause|resume|clear]`` in a session: ``{message, goal, stream_id?}``;
    ``locks``, ``work``, ``turns`` and ``store`` are the app's (those in use when None)."""
    turns = turn_journal.TURNS.get(turns)
    if not isinstance(args, str):
        raise BadRequest("goal must be a string")
    if len(args) > ARGS_MAX_CHARS:
        raise BadRequest(f"goal is too long (at most {ARGS_MAX_CHARS} characters)")
    text = args.strip()
    lower = text.lower()
    _messages(session_id, store)  # a session that does not exist is a 404 before the agent is asked
    with LOCKS.get(locks)(session_id):
        sets_a_goal = lower not in {"", "status", "pause", "resume", "clear", "stop", "done"}
        mgr = agent_goals.manager(session_id) if sets_a_goal else agent_goals.recorded_manager(session_id)
        if mgr is None:
            if lower in {"", "status"}:
                return {"message": NO_GOAL_STATUS, "goal": None}
            raise Conflict(NO_GOAL_TEXT)
        if not text or lower == "status":
            return _answer(mgr, mgr.status_line())
        if (lower == "pause" and not mgr.has_goal()) or (
            lower in {"resume", "clear", "stop", "done"} and not _has_state(mgr)
        ):
            raise Conflict(NO_GOAL_TEXT)
        if lower == "pause":
            mgr.pause(reason="paused by the person")
            _publish(session_id, agent_goals.card(session_id, mgr.state), turns=turns, store=store)
            return _answer(mgr, mgr.status_line())
        if lower == "resume":
            mgr.resume()
            card = agent_goals.card(session_id, mgr.state)
            _publish(session_id, card, turns=turns, store=store)
            started = None
            if turns.live_turn_for(session_id) is None:  # a live turn is judged when it ends
                started = _continue(session_id, mgr.next_continuation_prompt(), card, turns, work, store)
            return _answer(mgr, mgr.status_line(), started)
        if lower in {"clear", "stop", "done"}:
            card = agent_goals.card(session_id, mgr.state, status="stopped")
            mgr.clear()
            _publish(session_id, card, turns=turns, store=store)
            return {"message": "Goal cleared.", "goal": card}
        if mgr.has_goal():  # the goal it replaces ends on its card
            stopped = agent_goals.card(session_id, mgr.state, status="stopped")
            _publish(session_id, stopped, turns=turns, store=store)
        try:
            state = agent_goals.set_goal(mgr, text)
        except ValueError as exc:
            raise BadRequest(str(exc)) from exc
        card = agent_goals.card(session_id, state)
        started = _continue(session_id, state.goal, card, turns, work, store)
        return _answer(mgr, f"Goal set ({state.max_turns}-turn budget): {state.goal}", started)


def current(session_id: str, *, store: models.Store | None = None) -> dict[str, Any]:
    """``{goal: card | None}``: the session's goal as the agent holds it now."""
    _messages(session_id, store)
    mgr = agent_goals.recorded_manager(session_id)
    state = mgr.state if mgr is not None else None
    return {"goal": agent_goals.card(session_id, state) if state is not None else None}


def after_turn(
    session_id: str,
    *,
    locks: GoalLocks | None = None,
    work: streaming.Work | None = None,
    turns: LiveTurns | None = None,
    store: models.Store | None = None,
    workers: worker_pool.WorkerPool | None = None,
) -> None:
    """Judge the turn that ended (in one of ``workers``) and go on toward the goal, or pause it; nothing
    without an active goal. ``locks``, ``work``, ``turns``, ``store`` and ``workers`` are the app's (the app
    adds this to its ``Work`` with them)."""
    turns = turn_journal.TURNS.get(turns)
    if turns.live_turn_for(session_id) is not None:
        return  # a message the person queued went first; the goal is judged after it
    with LOCKS.get(locks)(session_id):
        try:
            mgr = agent_goals.recorded_manager(session_id)
        except agent_runtime.AgentUnavailable:
            return  # no agent, no goal: the turn's own error says why
        if mgr is None or mgr.state is None or not mgr.is_active():
            return
        answer, stopped = last_turn(_messages(session_id, store))
        ended = turns.latest_for(session_id)
        stopped = stopped or bool(ended is not None and ended.cancel_requested)
        if stopped or not answer.strip():
            mgr.pause(reason=STOPPED_REASON if stopped else NO_ANSWER_REASON)
            _publish(session_id, agent_goals.card(session_id, mgr.state), turns=turns, store=store)
            return
        try:
            asked = {"session_id": session_id, "answer": answer}
            judged = worker_pool.side_call("judge_goal", asked, pool=workers)
        except ApiError as exc:  # no worker answered (shutting down, a worker lost): the goal waits, paused
            log.warning("judging the goal of %s failed: %s", session_id, exc.message)
            mgr = agent_goals.manager(session_id)
            mgr.pause(reason=f"{JUDGE_LOST_REASON} ({exc.message})")
            _publish(session_id, agent_goals.card(session_id, mgr.state), turns=turns, store=store)
            return
        if judged is None:
            return  # paused or cleared meanwhile
        card = judged["card"]
        _publish(session_id, card, turns=turns, store=store)
        if judged["decision"]["should_continue"]:
            _continue(session_id, judged["decision"]["continuation_prompt"], card, turns, work, store)


def after_restart(
    session_ids: Iterable[str],
    *,
    locks: GoalLocks | None = None,
    turns: LiveTurns | None = None,
    store: models.Store | None = None,
) -> None:
    """Pause the goals whose turn a restart cut short (their answer is incomplete, as after a stop); ``locks``
    and ``turns`` are the app's (those in use when None)."""
    for session_id in session_ids:
        try:
            with LOCKS.get(locks)(session_id):
                mgr = agent_goals.recorded_manager(session_id)
                if mgr is None or mgr.state is None or not mgr.is_active():
                    continue
                mgr.pause(reason=RESTART_REASON)
                _publish(session_id, agent_goals.card(session_id, mgr.state), turns=turns, store=store)
        except Exception:  # noqa: BLE001 - one session's goal must not stop the others'
            log.exception("pausing the goal of %s after the restart failed", session_id)

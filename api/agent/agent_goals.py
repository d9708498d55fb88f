"""The agent's standing goals (its ``/goal`` loop), through hermes-agent's own ``hermes_cli.goals``.

A goal is the agent's ``GoalManager`` for a session: ``set``, ``pause``, ``resume``, ``clear``, and after
each turn ``evaluate_after_turn``, which asks the agent's judge model (its auxiliary ``goal_judge`` task)
whether the last answer met the goal and answers the continuation prompt while it says continue. The agent
keeps the state in its own ``state.db`` (``state_meta``, key ``goal:<session id>``) under its home; the
turn budget is the agent's ``goals.max_turns`` setting, as its CLI reads it.
"""

from __future__ import annotations

import time
from typing import Any

from api.agent import agent_runtime
from api.store import config, state_db

DEFAULT_MAX_TURNS = 20  # the agent's own default when its config names none
CARD_STATUS = {"active": "active", "paused": "paused", "done": "done", "cleared": "stopped"}
REASON_CHARS = 500  # of the judge's reason on the card


def _goals() -> Any:
    return agent_runtime.agent_module("hermes_cli.goals")


def max_turns() -> int:
    """The agent's ``goals.max_turns`` (as its CLI reads it), else its default."""
    try:
        config = agent_runtime.agent_module("hermes_cli.config").load_config() or {}
        return int((config.get("goals") or {}).get("max_turns", DEFAULT_MAX_TURNS) or DEFAULT_MAX_TURNS)
    except (TypeError, ValueError, AttributeError):
        return DEFAULT_MAX_TURNS


def manager(session_id: str) -> Any:
    """The agent's ``GoalManager`` of a session, its state loaded from the agent's store."""
    return _goals().GoalManager(session_id=session_id, default_max_turns=max_turns())


def recorded_manager(session_id: str) -> Any | None:
    """The session's ``GoalManager`` when the agent's store holds a goal for it, else None. The store is
    looked at read-only first (``state_db``): building a manager opens it for writing, which a session
    without a goal never needs."""
    if state_db.meta_value(config.STATE_DB_PATH, f"goal:{session_id}") is None:
        return None
    return manager(session_id)


def set_goal(mgr: Any, text: str) -> Any:
    """Start ``text`` as the standing goal; ``field: value`` lines become its completion contract, as in the
    agent's own ``/goal``. Raises ``ValueError`` for an empty goal."""
    headline, contract = _goals().parse_contract(text)
    return mgr.set(headline or text, contract=None if contract.is_empty() else contract)


def background_processes() -> list[dict[str, Any]] | None:
    """The agent's running background processes, for its judge (it may decide to wait on one)."""
    try:
        found = _goals().gather_background_processes()
    except Exception:  # noqa: BLE001 - the judge then decides without them, as the agent's CLI does
        return None
    return found if isinstance(found, list) else None


def _cut(value: Any, limit: int) -> str:
    text = " ".join(str(value or "").split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def card(session_id: str, state: Any, status: str | None = None) -> dict[str, Any]:
    """The goal's ``work`` card (kind ``goal``): its text, turns used of the budget, the judge's last verdict
    and reason, and its status (``active``, ``paused``, ``done``, ``stopped``)."""
    return {
        "id": f"goal-{session_id}-{int((state.created_at or 0) * 1000)}",
        "kind": "goal",
        "goal": _cut(state.goal, 300),
        "status": status or CARD_STATUS.get(state.status, "stopped"),
        "iteration": int(state.turns_used),
        "max_turns": int(state.max_turns),
        "verdict": state.last_verdict,
        "reason": _cut(state.last_reason, REASON_CHARS) if state.last_reason else None,
        "paused_reason": state.paused_reason,
        "started_at": float(state.created_at or 0),
        "updated_at": time.time(),
    }

"""Which toolsets can work here, by the agent's own check of their requirements.

``model_tools.check_tool_availability`` runs each tool's check and looks for the keys it needs; a toolset
with no usable tool is unavailable. The tools menu shows such a toolset unticked, with the reason in a
person's words, instead of promising a tool the agent will drop (web search without a search key).
"""

from __future__ import annotations

import logging
from typing import Any

from api.agent import agent_runtime
from api.agent.agent_answers import ANSWERS, AgentAnswers

log = logging.getLogger("talaria.toolsets")

_KEYS_SHOWN = 4
_KEY_SUFFIXES = ("_KEY", "_TOKEN", "_SECRET")


def reason_for(env_vars: list[Any]) -> str:
    """Why a toolset cannot work, from the variables the agent says it needs (pure)."""
    keys = [name for name in env_vars if isinstance(name, str) and name.endswith(_KEY_SUFFIXES)]
    if not keys:
        return "Not available: what it needs is not set up on this machine (the command hermes tools sets it up)."
    shown = ", ".join(keys[:_KEYS_SHOWN]) + (", …" if len(keys) > _KEYS_SHOWN else "")
    which = "one of " if len(keys) > 1 else ""
    return f"Not available: it needs a key. Set {which}{shown} in the agent's .env."


def unavailable_reasons(answers: AgentAnswers | None = None) -> dict[str, str]:
    """``{toolset: why it cannot work}`` for each toolset the agent finds unusable ({} if it cannot tell),
    asked again when the agent's config.yaml or .env changed; kept in ``answers`` (the app's in use when None),
    as the agent's check runs every tool's own check (about 0.2 s)."""
    held = ANSWERS.get(answers)
    stamp = agent_runtime.config_stamp()
    with held.lock:
        known = held.toolsets.get(stamp)
    if known is None:
        known = _ask_the_agent()
        with held.lock:
            held.toolsets.clear()
            held.toolsets[stamp] = known
    return known


def _ask_the_agent() -> dict[str, str]:
    try:
        model_tools = agent_runtime.agent_module("model_tools")
        _available, unavailable = model_tools.check_tool_availability(quiet=True)
    except Exception:  # noqa: BLE001 - without the check every toolset is offered, as before
        log.warning("the agent's toolset check failed", exc_info=True)
        return {}
    return {
        row["name"]: reason_for(list(row.get("env_vars") or []))
        for row in unavailable
        if isinstance(row, dict) and isinstance(row.get("name"), str)
    }


def with_availability(
    rows: list[dict[str, Any]], answers: AgentAnswers | None = None
) -> list[dict[str, Any]]:
    """Each toolset row with ``available`` and, when it is not, ``unavailable_reason``."""
    reasons = unavailable_reasons(answers)
    return [
        {**row, "available": row["name"] not in reasons}
        | ({"unavailable_reason": reasons[row["name"]]} if row["name"] in reasons else {})
        for row in rows
    ]

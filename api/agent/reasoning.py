"""A session's reasoning effort: the agent's levels (``none`` turns thinking off), the session's choice
(None follows ``agent.reasoning_effort`` and ``agent.reasoning_overrides`` of the agent's config.yaml) and
whether a model takes one at all, by the agent's own rule for the model's route (a route that ignores it
gets no picker)."""

from __future__ import annotations

from typing import Any

from api.agent import agent_runtime
from api.agent.agent_answers import ANSWERS, AgentAnswers
from api.rules.errors import BadRequest
from api.store import models, session_edit, session_lookup


def _supported(model: str, provider: str, answers: AgentAnswers) -> bool:
    # Whether a route takes an effort depends on the model, its provider and the agent's config, not on a
    # session: it is asked of a throwaway agent once per (model, provider, config stamp).
    key = (model, provider, agent_runtime.config_stamp())
    with answers.lock:
        known = answers.reasoning.get(key)
    if known is None:
        agent = agent_runtime.build_agent("reasoning-probe", model, provider or None, state_db_path=None)
        try:
            known = agent_runtime.reasoning_supported(agent)
        finally:
            agent_runtime.close_agent(agent)
        with answers.lock:
            answers.reasoning[key] = known
    return known


def _clean_pick(value: Any, name: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str) or len(value) > 200:
        raise BadRequest(f"{name} must be a model name")
    return value.strip()


def model_reasoning(model: Any, provider: Any = None, answers: AgentAnswers | None = None) -> dict[str, Any]:
    """``{model, default, levels, supported}`` for a model pick (``""``: the configured default); ``answers``
    keeps what the agent said (the app's in use when None)."""
    model = _clean_pick(model, "model") or agent_runtime.configured_default_model()
    provider = _clean_pick(provider, "model_provider")
    return {
        "model": model,
        "default": agent_runtime.configured_reasoning_effort(model) if model else None,
        "levels": agent_runtime.reasoning_levels(),
        "supported": bool(model) and _supported(model, provider, ANSWERS.get(answers)),
    }


def session_reasoning(
    sid: str, answers: AgentAnswers | None = None, *, store: models.Store | None = None
) -> dict[str, Any]:
    """``{effort, default, levels, supported}`` for the session's next turn."""
    session = session_lookup.load_session(sid, store=store)
    facts = model_reasoning(session.model or "", session.model_provider or "", answers)
    return {"session_id": sid, "effort": session.reasoning_effort, **facts}


def set_session_reasoning(sid: str, effort: Any, *, store: models.Store | None = None) -> dict[str, Any]:
    """Set (or with None reset to the configured default) the effort of the session's next turns."""
    session_lookup.load_session(sid, store=store)
    if effort is not None and (not isinstance(effort, str) or effort not in agent_runtime.reasoning_levels()):
        raise BadRequest(f"effort must be one of {', '.join(agent_runtime.reasoning_levels())}, or null")
    with session_edit.edit(sid, touch_updated_at=False, store=store) as session:
        session.reasoning_effort = effort
    return {"session": session.compact(), "effort": effort}

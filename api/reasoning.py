"""A session's reasoning effort: the agent's levels (``none`` turns thinking off), the session's choice
(None follows ``agent.reasoning_effort`` and ``agent.reasoning_overrides`` of the agent's config.yaml) and
whether this session's model takes one at all, by the agent's own rule for the model's route (a route
that ignores it gets no picker)."""

from __future__ import annotations

import threading
from typing import Any

from api import agent_pool, agent_runtime, session_catalogue, session_lookup
from api.errors import BadRequest

# Whether a route takes an effort depends on the model, its provider and the agent's config, not on the
# session: it is asked of one session's agent once per (model, provider, config stamp).
_SUPPORTED: dict[tuple[str, str, str], bool] = {}
_SUPPORTED_LOCK = threading.Lock()


def _supported(session: Any, model: str) -> bool:
    key = (model, session.model_provider or "", agent_runtime.config_stamp())
    with _SUPPORTED_LOCK:
        known = _SUPPORTED.get(key)
    if known is None:
        known = bool(agent_pool.probe(session, agent_runtime.reasoning_supported))
        with _SUPPORTED_LOCK:
            _SUPPORTED[key] = known
    return known


def session_reasoning(sid: str) -> dict[str, Any]:
    """``{effort, default, levels, supported}`` for the session's next turn."""
    session = session_lookup.load_session(sid)
    model = session.model or agent_runtime.configured_default_model()
    supported = bool(model) and _supported(session, model)
    return {
        "session_id": sid,
        "effort": session.reasoning_effort,
        "default": agent_runtime.configured_reasoning_effort(model) if model else None,
        "levels": agent_runtime.reasoning_levels(),
        "supported": supported,
    }


def set_session_reasoning(sid: str, effort: Any) -> dict[str, Any]:
    """Set (or with None reset to the configured default) the effort of the session's next turns."""
    session_lookup.load_session(sid)
    if effort is not None and (not isinstance(effort, str) or effort not in agent_runtime.reasoning_levels()):
        raise BadRequest(f"effort must be one of {', '.join(agent_runtime.reasoning_levels())}, or null")
    row = session_catalogue.edit_session(sid, lambda session: setattr(session, "reasoning_effort", effort))
    return {"session": row, "effort": effort}

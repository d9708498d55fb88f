"""Idle agents kept between turns, and the start-up warm-up that fills the pool before the first turn.

An ``AIAgent`` costs seconds the first time (importing the agent and its tools, resolving the provider)
and a fraction of that afterwards; a turn takes its session's agent from the pool and gives it back.
The key holds what the agent was built for (session, model, provider, toolsets): a change builds a new
one. ``warm_up`` runs once in the background at start: it imports the agent, resolves the provider and
builds the agent of the most recent session (with no session yet, builds one throwaway agent that
persists nothing, for the one-time costs), so neither ``/health`` nor the page waits for it. A turn
that starts during the warm-up waits for it rather than doing the same imports and build beside it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from api.agent import agent_runtime, provider_errors, toolsets
from api.store import config as _config
from api.store import models
from api.store.in_use import InUse

log = logging.getLogger("talaria.agent_pool")

CACHE_MAX = 8
BUILD_WAIT_S = 120.0
STOP_WAIT_S = 30.0  # how long a stopped agent may take to return before it is closed instead
# What building the first agent imports: the agent, its database, provider resolution, the tool registry.
_PRELOAD_BUILD = (
    "run_agent",
    "hermes_state",
    "hermes_cli.runtime_provider",
    "hermes_cli.tools_config",
    "model_tools",
)
# What the first turn imports lazily: the conversation loop and the OpenAI client's resources.
_PRELOAD_TURN = (
    "agent.conversation_loop",
    "agent.chat_completion_helpers",
    "agent.system_prompt",
    "agent.turn_finalizer",
    "openai.resources",
    "openai.lib.streaming.chat",
)


def spec_for(session: models.Session) -> dict[str, Any]:
    """What a session's agent is built from, as plain data (a worker process builds from it too)."""
    return {
        "session_id": session.session_id,
        "model": session.model or "",
        "provider": session.model_provider or "",
        "toolsets": toolsets.session_toolsets(session),
        "reasoning_effort": session.reasoning_effort or "",
    }


def key_of(spec: dict[str, Any]) -> str:
    # A model, provider or toolset switch, or an edit of the agent's config (here or by `hermes model`),
    # changes the key: the next turn builds a fitting agent.
    stamp = agent_runtime.config_stamp()
    return "\x00".join(
        [
            spec["session_id"],
            spec["model"],
            spec["provider"],
            stamp,
            spec["reasoning_effort"],
            *spec["toolsets"],
        ]
    )


def key_for(session: models.Session) -> str:
    return key_of(spec_for(session))


def _build(spec: dict[str, Any]) -> Any:
    return agent_runtime.build_agent(
        spec["session_id"],
        spec["model"] or None,
        spec["provider"] or None,
        state_db_path=_config.STATE_DB_PATH,
        enabled_toolsets=list(spec["toolsets"]),
        reasoning_effort=spec["reasoning_effort"] or None,
    )


def take(session: models.Session, *, agents: IdleAgents | None = None) -> tuple[str, Any]:
    """``(key, agent)`` for a turn of ``session``: the idle one among ``agents`` (the caller's app's; those in
    use when None; waiting for one being warmed), else new."""
    return take_spec(spec_for(session), agents=agents)


def take_spec(spec: dict[str, Any], *, agents: IdleAgents | None = None) -> tuple[str, Any]:
    """``(key, agent)`` for a turn of the session ``spec`` describes (``spec_for``)."""
    return AGENTS.get(agents).take_spec(spec)


def release(key: str, agent: Any, runner: Any, stopped: bool, *, agents: IdleAgents | None = None) -> None:
    """Back to the pool once its turn has ended, unless the turn was stopped: then it is closed.

    A stopped agent can still have a model call in flight (the HTTP client retries an abandoned
    request), whose late tokens would reach the next turn through the same callbacks; closing the
    agent ends that call and the next turn builds a fresh one.
    """
    done = runner is None or runner.done.is_set() or runner.done.wait(STOP_WAIT_S)
    if done and not stopped:
        give_back(key, agent, agents=agents)
        return
    if not done:
        log.warning("an agent did not stop within %.0f s; closing it", STOP_WAIT_S)
        runner.interrupt("Talaria closed this agent")
    agent_runtime.close_agent(agent)


def give_back(key: str, agent: Any, *, agents: IdleAgents | None = None) -> None:
    AGENTS.get(agents).give_back(key, agent)


def forget_idle_agents() -> None:
    """Close the cached agents between turns (the agent's configuration changed under them)."""
    AGENTS.get().forget()


def idle_count() -> int:
    return AGENTS.get().idle_count()


# ---------------------------------------------------------------------- warm-up


def _most_recent_session() -> models.Session | None:
    rows = (
        row for row in models.store().newest_first() if row.get("session_id") and not row.get("read_only")
    )
    newest = next(rows, None)
    if newest is None:
        return None
    try:
        return models.get_session(newest["session_id"])
    except (KeyError, OSError, ValueError):
        return None


def latest_spec() -> dict[str, Any] | None:
    """The agent spec of the most recent session the warm-up builds (None: no session yet)."""
    session = _most_recent_session()
    return None if session is None else spec_for(session)


def _import_all(names: tuple[str, ...]) -> None:
    for name in names:
        agent_runtime.agent_module(name)


def _warn_if_unreachable(model: str, runtime: dict[str, Any]) -> None:
    """Say at start, not after a turn's retries, that the model's endpoint refuses or does not answer."""
    base_url = str(runtime.get("base_url") or "")
    if not base_url:
        return
    endpoint = provider_errors.Endpoint(base_url, model, runtime.get("api_key") or None)
    found = provider_errors.probe_endpoint(endpoint)
    if found.kind in ("refused", "unreachable", "auth"):
        log.warning("%s", provider_errors.advice(found.kind, endpoint, found))


def _build_first_agent(
    find_spec: Callable[[], dict[str, Any] | None], warm: Callable[[dict[str, Any]], None]
) -> None:
    model = agent_runtime.configured_default_model()
    if not model:
        log.info("warm-up: no model configured")
        return
    runtime = agent_runtime.resolve_runtime(model)
    _warn_if_unreachable(model, runtime)
    spec = find_spec()
    if spec is not None:
        warm(spec)
        log.info("warm-up: built the agent of session %s", spec["session_id"])
    else:  # no session yet: one agent built and closed pays the one-time costs (plugins, tool registry)
        agent_runtime.close_agent(
            agent_runtime.build_agent(
                "warm-up", model, None, state_db_path=None, enabled_toolsets=toolsets.default_toolsets()
            )
        )


def warm_up(find_spec: Callable[[], dict[str, Any] | None] = latest_spec) -> None:
    """Import the agent, resolve the provider, build the agent ``find_spec`` names (the most recent
    session's), then import what its first turn needs; never raises. A turn waits only for the build: the
    turn's imports it shares."""
    AGENTS.get().warm_up(find_spec)


def start_warm_up(find_spec: Callable[[], dict[str, Any] | None] = latest_spec) -> threading.Thread:
    return AGENTS.get().start_warm_up(find_spec)


class IdleAgents:
    """The idle agents of one process (key → agent, oldest first) and its warm-up. The server's app owns one
    (``App.agents``), put in use; a worker process, which has no app, uses the one ``AGENTS`` builds."""

    def __init__(self) -> None:
        self._agents: OrderedDict[str, Any] = OrderedDict()
        self._lock = threading.Lock()
        self._warm_up_done = threading.Event()
        self._warm_up_done.set()  # no warm-up running

    def take_spec(self, spec: dict[str, Any]) -> tuple[str, Any]:
        # The warm-up does the imports and the first build this turn would do: wait for it, not beside it.
        self._warm_up_done.wait(BUILD_WAIT_S)
        key = key_of(spec)
        with self._lock:
            agent = self._agents.pop(key, None)
        return key, agent if agent is not None else _build(spec)

    def give_back(self, key: str, agent: Any) -> None:
        with self._lock:
            replaced = self._agents.pop(key, None)
            self._agents[key] = agent
            evicted = [self._agents.popitem(last=False)[1] for _ in range(len(self._agents) - CACHE_MAX)]
        for old in ([replaced] if replaced is not None and replaced is not agent else []) + evicted:
            agent_runtime.close_agent(old)

    def forget(self) -> None:
        with self._lock:
            idle = list(self._agents.values())
            self._agents.clear()
        for agent in idle:
            agent_runtime.close_agent(agent)

    def idle_count(self) -> int:
        with self._lock:
            return len(self._agents)

    def warm(self, spec: dict[str, Any]) -> None:
        """Build the agent of ``spec`` unless one is idle already."""
        key = key_of(spec)
        with self._lock:
            if key in self._agents:
                return
        self.give_back(key, _build(spec))

    def warm_up(self, find_spec: Callable[[], dict[str, Any] | None]) -> None:
        started = time.monotonic()
        try:
            try:
                _import_all(_PRELOAD_BUILD)
                _build_first_agent(find_spec, self.warm)
            finally:
                self._warm_up_done.set()
            _import_all(_PRELOAD_TURN)
            log.info("warm-up done in %.1f s", time.monotonic() - started)
        except Exception as exc:  # noqa: BLE001 - a failed warm-up only means the first turn does the work
            log.info("warm-up stopped (%s: %s); the first turn builds its agent", type(exc).__name__, exc)

    def start_warm_up(self, find_spec: Callable[[], dict[str, Any] | None]) -> threading.Thread:
        self._warm_up_done.clear()
        thread = threading.Thread(target=self.warm_up, args=(find_spec,), name="warm-up", daemon=True)
        thread.start()
        return thread


AGENTS: InUse[IdleAgents] = InUse(
    IdleAgents
)  # the app's (``App.agents``), else built on first use (a worker's)

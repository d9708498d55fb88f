"""The one module that imports hermes-agent: every agent module is imported here, at call time
(``agent_module``); build an ``AIAgent``, its side calls (title, token estimate, manual compression, image
parts), interrupt and close. Its callbacks become ``(name, data)`` events in ``api.agent.agent_events``;
``AgentCallbacks`` here adds hermes' own tool-failure verdict (``TOOL_RESULT_CAP`` is re-exported). A turn
runs in ``api.agent.agent_turn``; its thread is bound to the session in ``api.agent.agent_binding``.

hermes-agent modules (``run_agent``, ``hermes_state``, ``hermes_cli.*``) are imported at call time,
never at module import, so tests can put fakes in ``sys.modules`` and the rest of Talaria imports
without the agent's side effects (it creates folders under ``$HERMES_HOME``, wraps ``sys.stdout``,
installs root logging handlers). ``$HERMES_HOME`` must be final before the first agent import.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import logging
import random
import sqlite3
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, cast

from api.agent import agent_events, tls_contexts
from api.agent.agent_events import TOOL_RESULT_CAP, OnEvent  # noqa: F401 (re-exported)
from api.rules import checkpoint_scripts
from api.rules.errors import ServiceUnavailable
from api.store import config

log = logging.getLogger(__name__)


def provider_help() -> str:
    """How to configure a provider, for a person reading an error (Markdown: the example is a code block)."""
    home = config.HERMES_HOME
    return (
        f"Set one up with **Set up a model**, or in {home}/config.yaml with a `model:` section, for example:\n\n"
        "```yaml\n"
        "model:\n"
        "  provider: custom\n"
        "  base_url: http://127.0.0.1:11434/v1   # a local Ollama, or any OpenAI-compatible endpoint\n"
        "  default: <model name>\n"
        "```\n\n"
        f"(put an API key in `model.api_key` or {home}/.env if the endpoint needs one), "
        "or run `hermes setup` / `hermes model`."
    )


class AgentUnavailable(ServiceUnavailable):
    """hermes-agent cannot be imported or constructed."""

    def __init__(self, detail: str):
        super().__init__(f"The Hermes agent is unavailable: {detail}")


class ProviderNotConfigured(ServiceUnavailable):
    """No usable LLM provider in the agent's configuration."""

    def __init__(self, detail: str = "No LLM provider is configured for the Hermes agent."):
        super().__init__(f"{detail.rstrip()}\n\n{provider_help()}")


# The agent's modules import others at import time and while its first agent is built; two threads doing
# that at once (the warm-up, a request) can be handed a module still initialising, or a SystemError. The
# first imports of a module and the first build run one at a time; once loaded, nothing waits.
_AGENT_IMPORTS = threading.RLock()
_AGENT_BUILT = threading.Event()


def _loaded(module: str) -> ModuleType | None:
    found = sys.modules.get(module)
    spec = getattr(found, "__spec__", None)
    return None if found is None or getattr(spec, "_initializing", False) else found


def _import(module: str) -> ModuleType:
    # At call time, never at import: tests put fakes in sys.modules, and the agent's import has side effects.
    loaded = _loaded(module)
    if loaded is not None:
        return loaded
    try:
        with _AGENT_IMPORTS:
            return importlib.import_module(module)
    except Exception as exc:  # ImportError, or the agent's own import-time failures
        raise AgentUnavailable(
            f"cannot import {module} ({type(exc).__name__}: {exc}); install hermes-agent==0.19.0"
        ) from exc


def agent_module(module: str) -> ModuleType:
    """A hermes-agent module, imported at call time (``AgentUnavailable`` when it cannot be)."""
    return _import(module)


# The agent's configuration modules behind the model picker, the setup form and the toolsets. They
# import in a few hundred milliseconds and write nothing (only reading the config sets up its home).
CONFIG_MODULES = (
    "hermes_cli.config",
    "hermes_cli.auth",
    "hermes_cli.runtime_provider",
    "hermes_cli.inventory",
    "hermes_cli.model_switch",
    "hermes_cli.tools_config",
)


def config_stamp() -> str:
    """When the agent's ``config.yaml`` and ``.env`` last changed: an agent built before a change is stale."""
    stamps = []
    for name in ("config.yaml", ".env"):
        try:
            stamps.append(str((config.HERMES_HOME / name).stat().st_mtime_ns))
        except OSError:
            stamps.append("-")
    return "/".join(stamps)


def preload_config_modules() -> None:
    """Import ``CONFIG_MODULES`` ahead of the first page (run in a background thread at startup)."""
    for name in CONFIG_MODULES:
        try:
            _import(name)
        except AgentUnavailable:
            log.warning("preloading %s failed", name, exc_info=True)
            return


# ----------------------------------------------------------------------------------------------
# Runtime resolution and construction
# ----------------------------------------------------------------------------------------------


def configured_default_model() -> str:
    """``model.default`` of the agent's config.yaml, or ``""``."""
    try:
        cfg = _import("hermes_cli.config").load_config()
    except Exception:
        return ""
    model = cfg.get("model") if isinstance(cfg, dict) else None
    if isinstance(model, str):
        return model
    return str(model.get("default") or "") if isinstance(model, dict) else ""


def resolve_runtime(model: str | None, provider: str | None = None) -> dict[str, Any]:
    """Provider, base_url, api_key, api_mode (and extras) for a model, from the agent's own config."""
    runtime_provider = _import("hermes_cli.runtime_provider")
    try:
        resolve = runtime_provider.resolve_runtime_provider
        runtime = resolve(
            **accepted_kwargs(resolve, {"requested": provider or None, "target_model": model or None})
        )
    except Exception as exc:
        # AuthError ("No inference provider configured…"), unknown providers, unreadable config:
        # all are configuration problems the person fixes the same way.
        if (
            type(exc).__name__ == "AuthError"
        ):  # "No inference provider configured…" (its hints name ~/.hermes)
            raise ProviderNotConfigured() from exc
        raise ProviderNotConfigured(f"Could not resolve an LLM provider: {exc}") from exc
    if not isinstance(runtime, dict) or not (runtime.get("base_url") or runtime.get("command")):
        raise ProviderNotConfigured()
    return dict(runtime)


def accepted_kwargs(func: Callable[..., Any], kwargs: dict[str, Any]) -> dict[str, Any]:
    """Only the kwargs ``func`` accepts, so a newer or older agent still constructs."""
    try:
        params = inspect.signature(func).parameters
    except (TypeError, ValueError):
        return kwargs
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return kwargs
    return {k: v for k, v in kwargs.items() if k in params}


@contextlib.contextmanager
def _first_build_alone() -> Iterator[None]:
    """Holds the import lock around the process's first agent build (its lazy imports), not later ones."""
    if _AGENT_BUILT.is_set():
        yield
        return
    with _AGENT_IMPORTS:
        yield
        _AGENT_BUILT.set()


def build_agent(
    session_id: str,
    model: str | None,
    provider: str | None = None,
    *,
    callbacks: AgentCallbacks | None = None,
    state_db_path: str | Path | None,
    runtime: dict[str, Any] | None = None,
    enabled_toolsets: list[str] | None = None,
    disabled_toolsets: list[str] | None = None,
    skip_context_files: bool = False,
    skip_memory: bool = False,
    max_iterations: int | None = None,
    ephemeral_system_prompt: str | None = None,
    end_session_on_close: bool = False,
    reasoning_effort: str | None = None,
    **extra: Any,
) -> Any:
    """A ready ``AIAgent`` for one session, persisting to ``state_db_path`` and reporting to ``callbacks``.

    ``state_db_path`` is explicit because ``hermes_state.DEFAULT_DB_PATH`` is frozen at import;
    ``None`` means the agent persists nothing (a throwaway agent for a manual compression).
    ``end_session_on_close=False`` keeps ``agent.close()`` from marking the state.db session ended
    (``end_reason='agent_close'``): Talaria closes cached agents on eviction while the conversation
    goes on. ``reasoning_effort`` is the session's choice (None: what the agent's config says for the model).
    ``extra`` passes further constructor kwargs (dropped if this agent does not take them).
    """
    model = (model or "").strip() or configured_default_model()
    if not model:
        raise ProviderNotConfigured("No model is configured for the Hermes agent.")
    if state_db_path is not None:  # a session's own agent (a side call's throwaway one needs neither)
        extra.setdefault("reasoning_config", reasoning_config_for(reasoning_effort, model))
        extra.update(checkpoint_kwargs())
    runtime = runtime if runtime is not None else resolve_runtime(model, provider)
    with _first_build_alone():
        run_agent = _import("run_agent")
        tls_contexts.share(_import("agent.ssl_verify"))  # a model request no longer loads a CA bundle
        callbacks = callbacks or AgentCallbacks()
        session_db = None if state_db_path is None else open_session_db(Path(state_db_path))
        kwargs: dict[str, Any] = {
            "model": model,
            "provider": runtime.get("provider"),
            "base_url": runtime.get("base_url"),
            "api_key": runtime.get("api_key"),
            "api_mode": runtime.get("api_mode"),
            "credential_pool": runtime.get("credential_pool"),
            "acp_command": runtime.get("command"),
            "acp_args": runtime.get("args"),
            "platform": "webui",
            "quiet_mode": True,
            "session_id": session_id,
            "gateway_session_key": session_id,
            "session_db": session_db,
            "enabled_toolsets": enabled_toolsets,
            "disabled_toolsets": disabled_toolsets,
            "skip_context_files": skip_context_files,
            "skip_memory": skip_memory,
            "ephemeral_system_prompt": ephemeral_system_prompt,
            **callbacks.agent_kwargs(),
            **extra,
        }
        if max_iterations is not None:
            kwargs["max_iterations"] = max_iterations
        kwargs = {k: v for k, v in kwargs.items() if v is not None}  # [] (no tools) is kept
        try:
            agent = run_agent.AIAgent(**accepted_kwargs(run_agent.AIAgent.__init__, kwargs))
        except Exception as exc:
            if session_db is not None:
                session_db.close()
            if not isinstance(exc, (RuntimeError, ValueError)):
                raise
            if "provider" in str(exc).lower():  # "No LLM provider configured…"
                raise ProviderNotConfigured(str(exc)) from exc
            raise AgentUnavailable(str(exc)) from exc  # e.g. a context window below hermes' 64K floor
    agent.suppress_status_output = True  # lifecycle notices go to status_callback, not our stdout
    agent._end_session_on_close = end_session_on_close
    agent._talaria_callbacks = callbacks
    return agent


# Per process, as the clash it prevents is: two opens of one new database in this process fail each other.
_SESSION_DB_OPENING = threading.Lock()
SESSION_DB_OPEN_ATTEMPTS = 4


def open_session_db(path: Path) -> Any:
    """The agent's ``SessionDB`` on ``path``, opened one at a time in this process.

    Opening one creates or migrates the schema; two at once on a new database fail with "database is
    locked" or "vtable constructor failed" (the full-text tables), which ended a first turn. Another
    process (the agent's gateway) can still be opening it too: such an error is tried again.
    """
    session_db_class = _import("hermes_state").SessionDB
    with _SESSION_DB_OPENING:
        for _ in range(SESSION_DB_OPEN_ATTEMPTS - 1):
            try:
                return session_db_class(db_path=path)
            except sqlite3.OperationalError:
                log.warning("opening %s failed; trying again", path.name, exc_info=True)
                time.sleep(random.uniform(0.02, 0.15))
        return session_db_class(db_path=path)


def tools_elsewhere() -> bool:
    """Whether this process's terminal and file tools run in another execution environment (the agent's own
    reading of its ``TERMINAL_*`` settings), not on this machine."""
    env_type = _import("tools.terminal_tool")._get_env_config().get("env_type")
    return env_type not in (None, "", "local")


def checkpoint_limits() -> checkpoint_scripts.Limits:
    """How much a checkpoint store keeps: the agent's ``checkpoints:`` settings (its defaults where unset) and
    its guard on a folder's file count."""
    section = _import("hermes_cli.config").load_config().get("checkpoints")
    section = section if isinstance(section, dict) else {}
    defaults = checkpoint_scripts.Limits()

    def number(key: str, default: int) -> int:
        value = section.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else default

    return checkpoint_scripts.Limits(
        snapshots=max(1, number("max_snapshots", defaults.snapshots)),
        file_mb=number("max_file_size_mb", defaults.file_mb),
        total_mb=number("max_total_size_mb", defaults.total_mb),
        files=int(getattr(_import("tools.checkpoint_manager"), "_MAX_FILES", defaults.files)),
    )


def checkpoint_kwargs() -> dict[str, Any]:
    """The agent's per-turn checkpoints of the workspace, on for every web session (the changes view and
    its restore read them), sized by the agent's ``checkpoints:`` settings. Off where the tools run in another
    execution environment: the agent checkpoints folders of this machine, which there are at most folders of
    the same name here, never the ones its tools change (such a turn snapshots the host's folder instead,
    ``api.agent.host_checkpoints``)."""
    if tools_elsewhere():
        return {"checkpoints_enabled": False}
    limits = checkpoint_limits()
    return {
        "checkpoints_enabled": True,
        "checkpoint_max_snapshots": limits.snapshots,
        "checkpoint_max_total_size_mb": limits.total_mb,
        "checkpoint_max_file_size_mb": limits.file_mb,
    }


def checkpoint_manager() -> Any:
    """The agent's own checkpoint store, for listing, diffing and restoring a workspace's checkpoints."""
    limits = checkpoint_limits()
    manager = _import("tools.checkpoint_manager").CheckpointManager
    return manager(
        enabled=True,
        max_snapshots=limits.snapshots,
        max_total_size_mb=limits.total_mb,
        max_file_size_mb=limits.file_mb,
    )


def reasoning_levels() -> list[str]:
    """The efforts the agent knows, with ``none`` (thinking off) first."""
    return ["none", *_import("hermes_constants").VALID_REASONING_EFFORTS]


def reasoning_config_for(effort: str | None, model: str) -> dict[str, Any] | None:
    """The agent's reasoning config for a turn: the session's effort when it chose one, else what the
    agent's config.yaml says for this model (``agent.reasoning_overrides``, ``agent.reasoning_effort``)."""
    constants = _import("hermes_constants")
    if effort:
        return cast("dict[str, Any] | None", constants.parse_reasoning_effort(effort))
    return cast(
        "dict[str, Any] | None",
        constants.resolve_reasoning_config(_import("hermes_cli.config").load_config(), model),
    )


def configured_reasoning_effort(model: str) -> str | None:
    """The effort the agent's config.yaml sets for ``model`` (``none`` for thinking off), or None."""
    config = reasoning_config_for(None, model)
    if not isinstance(config, dict):
        return None
    return "none" if config.get("enabled") is False else str(config.get("effort") or "") or None


def reasoning_supported(agent: Any) -> bool:
    """Whether the agent sends a reasoning effort on this model's route (its own rule for the route)."""
    if getattr(agent, "api_mode", "") in ("anthropic_messages", "codex_responses"):
        return True
    check = getattr(agent, "_supports_reasoning_extra_body", None)
    try:
        return bool(check()) if callable(check) else False
    except Exception:  # noqa: BLE001 - a probe that fails means the effort would not be sent
        return False


def main_runtime(agent: Any) -> dict[str, Any] | None:
    """The agent's live runtime (model, provider, endpoint, key) for a side call such as a title."""
    current = getattr(agent, "_current_main_runtime", None)
    try:
        return dict(current()) if callable(current) else None
    except Exception:  # noqa: BLE001 - a side call then uses the agent's configured default
        return None


def generate_title(
    user_text: str, answer_text: str, runtime: dict[str, Any] | None, timeout: float = 30.0
) -> str | None:
    """A short title for a first exchange, by the agent's own title generator (None when it fails)."""
    title_generator = agent_module("agent.title_generator")
    return cast(
        "str | None",
        title_generator.generate_title(user_text, answer_text, timeout=timeout, main_runtime=runtime),
    )


def user_content(agent: Any, text: str, image_paths: list[str], cfg: dict[str, Any] | None = None) -> Any:
    """The user message as the agent gets it. With attached images, and a model the agent's own image
    routing says can see them (``agent.image_input_mode``, the model's vision capability), OpenAI-style
    parts: the text as saved (it names each attachment's path), then each image as a data URL.
    Otherwise the text alone (the agent can still open the files by their paths)."""
    if not image_paths:
        return text
    try:
        routing = agent_module("agent.image_routing")
        if cfg is None:
            cfg = agent_module("hermes_cli.config").load_config_readonly()
        provider = str(getattr(agent, "provider", "") or "")
        model = str(getattr(agent, "model", "") or "")
        if routing.decide_image_input_mode(provider, model, cfg) != "native":
            return text
        parts, _skipped = routing.build_native_content_parts(text, list(image_paths))
    except Exception:  # noqa: BLE001 - the text still names every file
        log.warning("building image parts failed; sending the text alone", exc_info=True)
        return text
    images = [part for part in parts if isinstance(part, dict) and part.get("type") == "image_url"]
    return [{"type": "text", "text": text}, *images] if images else text


def close_agent(agent: Any) -> None:
    """Close the agent's clients and its SessionDB handle (errors are logged, not raised)."""
    try:
        agent.close()
    except Exception:
        log.exception("agent.close failed")
    db = getattr(agent, "_session_db", None) or getattr(agent, "session_db", None)
    try:
        if db is not None:
            db.close()
    except Exception:
        log.debug("session_db.close failed", exc_info=True)


def interrupt(agent: Any, message: str | None = None) -> None:
    """Ask a running turn to stop (safe from any thread; the turn returns ``interrupted=True``)."""
    agent.interrupt(message)


def steer(agent: Any, text: str) -> bool:
    """Hand ``text`` to the running turn (the agent's ``/steer``): it is appended, marked as the person's,
    to the next tool result the model reads. False when the agent refuses it (empty text, no support)."""
    method = getattr(agent, "steer", None)
    return bool(method(text)) if callable(method) else False


def take_pending_steer(agent: Any) -> str:
    """A steer the agent holds but has not delivered, taken out of it (so no later turn receives it)."""
    drain = getattr(agent, "_drain_pending_steer", None)
    text = drain() if callable(drain) else None
    return text if isinstance(text, str) else ""


def estimate_tokens(messages: list[dict[str, Any]]) -> int:
    """The agent's rough token estimate of a message list (chars / 4 if unavailable)."""
    try:
        return int(_import("agent.model_metadata").estimate_messages_tokens_rough(messages))
    except Exception:
        return sum(len(str(m.get("content") or "")) for m in messages) // 4


def estimate_request_tokens(agent: Any, messages: list[dict[str, Any]]) -> int:
    """The agent's rough estimate of a whole request holding ``messages``: its system prompt and tool
    schemas count too, as in hermes' own /compress and in the provider's count the context meter shows."""
    try:
        system_prompt = getattr(agent, "_cached_system_prompt", None) or agent._build_system_prompt(None)
        tools = getattr(agent, "tools", None) or None
        estimate = _import("agent.model_metadata").estimate_request_tokens_rough
        return int(estimate(messages, system_prompt=system_prompt or "", tools=tools))
    except Exception:  # noqa: BLE001 - an agent without these parts is estimated on its messages
        return estimate_tokens(messages)


def manual_compression_feedback(
    original: list[Any], compressed: list[Any], before: int, after: int
) -> dict[str, Any] | None:
    """The agent's own wording for a manual compression (headline, token line, note), if it has one."""
    try:
        summary = _import("agent.manual_compression_feedback").summarize_manual_compression(
            original, compressed, before, after
        )
    except Exception:
        return None
    return summary if isinstance(summary, dict) else None


def tool_failed(name: str, result: Any) -> bool:
    """hermes' own verdict on a tool result (``agent.display``); False when it cannot say."""
    try:
        return bool(_import("agent.display")._detect_tool_failure(name, result)[0])
    except Exception:
        return False


class AgentCallbacks(agent_events.AgentCallbacks):
    """The agent's callbacks as events (``api.agent.agent_events``), with hermes' own tool-failure verdict."""

    def tool_failed(self, name: str, result: Any) -> bool:
        return tool_failed(name, result)


def callbacks_for(agent: Any) -> AgentCallbacks:
    """The agent's ``AgentCallbacks``, binding a fresh one if it was built elsewhere."""
    callbacks = getattr(agent, "_talaria_callbacks", None)
    if not isinstance(callbacks, AgentCallbacks):
        callbacks = AgentCallbacks()
        callbacks.bind(agent)
    return callbacks


@dataclass
class CompressOutcome:
    messages: Any  # what the compressor returned (the input list itself when nothing changed); unvalidated
    changed: bool
    aborted: bool  # the summary call failed hard (auth, quota, network): messages unchanged
    fallback_summary: bool  # the summary is hermes' deterministic fallback, not the model's


def compress_messages(
    agent: Any,
    messages: list[dict[str, Any]],
    *,
    focus_topic: str | None = None,
    current_tokens: int | None = None,
) -> CompressOutcome:
    """Manual compaction through the agent's own compressor (its summary call goes to the provider).

    The input list and its dicts are not mutated. The summary row carries ``SUMMARY_PREFIX``
    (``[CONTEXT COMPACTION — REFERENCE ONLY] …``), standalone or merged into the first tail message.
    """
    compressor = agent.context_compressor
    tokens = current_tokens if current_tokens is not None else estimate_tokens(messages)
    out = compressor.compress(messages, current_tokens=tokens, focus_topic=focus_topic or None)
    return CompressOutcome(
        messages=out,
        changed=out is not messages,
        aborted=bool(getattr(compressor, "_last_compress_aborted", False)),
        fallback_summary=bool(getattr(compressor, "_last_summary_fallback_used", False)),
    )

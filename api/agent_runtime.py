"""The one module that imports hermes-agent: build an ``AIAgent``, run a turn in a worker thread,
interrupt it. Its callbacks become ``(name, data)`` events in ``api.agent_events``; ``AgentCallbacks`` here
adds hermes' own tool-failure verdict (``TOOL_RESULT_CAP`` is re-exported).

hermes-agent modules (``run_agent``, ``hermes_state``, ``hermes_cli.*``) are imported at call time,
never at module import, so tests can put fakes in ``sys.modules`` and the rest of Talaria imports
without the agent's side effects (it creates folders under ``$HERMES_HOME``, wraps ``sys.stdout``,
installs root logging handlers). ``$HERMES_HOME`` must be final before the first agent import.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from api import agent_events, config
from api.agent_events import TOOL_RESULT_CAP, OnEvent  # noqa: F401 (re-exported)
from api.errors import ServiceUnavailable

log = logging.getLogger(__name__)


def provider_help() -> str:
    """How to configure a provider, for a person reading an error event."""
    home = config.HERMES_HOME
    return (
        f"Configure one in {home}/config.yaml with a `model:` section, for example:\n"
        "  model:\n"
        "    provider: custom\n"
        "    base_url: http://127.0.0.1:11434/v1   # a local Ollama, or any OpenAI-compatible endpoint\n"
        "    default: <model name>\n"
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
        super().__init__(f"{detail.rstrip()}\n{provider_help()}")


def _import(module: str):
    import importlib

    try:
        return importlib.import_module(module)
    except Exception as exc:  # ImportError, or the agent's own import-time failures
        raise AgentUnavailable(
            f"cannot import {module} ({type(exc).__name__}: {exc}); install hermes-agent==0.19.0"
        ) from exc


def agent_module(module: str):
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


def resolve_runtime(model: str | None, provider: str | None = None) -> dict:
    """Provider, base_url, api_key, api_mode (and extras) for a model, from the agent's own config."""
    runtime_provider = _import("hermes_cli.runtime_provider")
    try:
        resolve = runtime_provider.resolve_runtime_provider
        runtime = resolve(
            **_accepted_kwargs(resolve, {"requested": provider or None, "target_model": model or None})
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


def _accepted_kwargs(func: Callable, kwargs: dict) -> dict:
    """Only the kwargs ``func`` accepts, so a newer or older agent still constructs."""
    try:
        params = inspect.signature(func).parameters
    except (TypeError, ValueError):
        return kwargs
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return kwargs
    return {k: v for k, v in kwargs.items() if k in params}


def build_agent(
    session_id: str,
    model: str | None,
    provider: str | None = None,
    *,
    callbacks: AgentCallbacks | None = None,
    state_db_path: str | Path | None,
    runtime: dict | None = None,
    enabled_toolsets: list[str] | None = None,
    disabled_toolsets: list[str] | None = None,
    skip_context_files: bool = False,
    skip_memory: bool = False,
    max_iterations: int | None = None,
    ephemeral_system_prompt: str | None = None,
    end_session_on_close: bool = False,
    **extra: Any,
):
    """A ready ``AIAgent`` for one session, persisting to ``state_db_path`` and reporting to ``callbacks``.

    ``state_db_path`` is explicit because ``hermes_state.DEFAULT_DB_PATH`` is frozen at import;
    ``None`` means the agent persists nothing (a throwaway agent for a manual compression).
    ``end_session_on_close=False`` keeps ``agent.close()`` from marking the state.db session ended
    (``end_reason='agent_close'``): Talaria closes cached agents on eviction while the conversation
    goes on. ``extra`` passes further constructor kwargs (dropped if this agent does not take them).
    """
    model = (model or "").strip() or configured_default_model()
    if not model:
        raise ProviderNotConfigured("No model is configured for the Hermes agent.")
    runtime = runtime if runtime is not None else resolve_runtime(model, provider)
    run_agent = _import("run_agent")
    callbacks = callbacks or AgentCallbacks()
    session_db = (
        None if state_db_path is None else _import("hermes_state").SessionDB(db_path=Path(state_db_path))
    )
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
        agent = run_agent.AIAgent(**_accepted_kwargs(run_agent.AIAgent.__init__, kwargs))
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


def main_runtime(agent) -> dict | None:
    """The agent's live runtime (model, provider, endpoint, key) for a side call such as a title."""
    current = getattr(agent, "_current_main_runtime", None)
    try:
        return dict(current()) if callable(current) else None
    except Exception:  # noqa: BLE001 - a side call then uses the agent's configured default
        return None


def generate_title(
    user_text: str, answer_text: str, runtime: dict | None, timeout: float = 30.0
) -> str | None:
    """A short title for a first exchange, by the agent's own title generator (None when it fails)."""
    title_generator = agent_module("agent.title_generator")
    return title_generator.generate_title(user_text, answer_text, timeout=timeout, main_runtime=runtime)


def user_content(agent, text: str, image_paths: list[str], cfg: dict | None = None) -> Any:
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


def close_agent(agent) -> None:
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


def interrupt(agent, message: str | None = None) -> None:
    """Ask a running turn to stop (safe from any thread; the turn returns ``interrupted=True``)."""
    agent.interrupt(message)


def estimate_tokens(messages: list[dict]) -> int:
    """The agent's rough token estimate of a message list (chars / 4 if unavailable)."""
    try:
        return int(_import("agent.model_metadata").estimate_messages_tokens_rough(messages))
    except Exception:
        return sum(len(str(m.get("content") or "")) for m in messages) // 4


def manual_compression_feedback(original: list, compressed: list, before: int, after: int) -> dict | None:
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
        from agent.display import _detect_tool_failure

        return bool(_detect_tool_failure(name, result)[0])
    except Exception:
        return False


class AgentCallbacks(agent_events.AgentCallbacks):
    """The agent's callbacks as events (``api.agent_events``), with hermes' own tool-failure verdict."""

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
    agent, messages: list[dict], *, focus_topic: str | None = None, current_tokens: int | None = None
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


# ----------------------------------------------------------------------------------------------
# A turn's session context: workspace, approvals, clarify
# ----------------------------------------------------------------------------------------------

AskApproval = Callable[[dict, Callable[[], bool]], tuple[str, str | None]]
AskClarify = Callable[[str, list | None, Callable[[], bool]], str]


@dataclass
class TurnScope:
    """What one turn's tools see: the session's workspace and how the person is asked.

    ``ask_approval(data, interrupted)`` blocks until the person (or a deadline, cancel, stop) decides and
    returns ``(choice, deny_reason)``; ``ask_clarify(question, choices, interrupted)`` returns the answer.
    ``interrupted()`` is the agent's own interrupt flag of the asking thread.
    """

    session_id: str  # Talaria's id: the approval session key, stable when the agent rotates its own id
    workspace: str
    ask_approval: AskApproval
    ask_clarify: AskClarify
    yolo: bool = False


def apply_session_yolo(session_id: str, enabled: bool) -> None:
    """The agent's per-session "don't ask again" (its gateway /yolo), if the agent is loaded yet;
    ``session_bound`` applies it again at the start of every turn."""
    approval = sys.modules.get("tools.approval")
    if approval is not None:
        (approval.enable_session_yolo if enabled else approval.disable_session_yolo)(session_id)


@contextlib.contextmanager
def session_bound(agent, scope: TurnScope | None) -> Iterator[None]:
    """Bind the calling thread to the agent's session the way hermes' gateways do.

    Context variables (the agent's session context, its approval session key, the logical cwd) are
    local to this thread and the tool threads the agent starts from it, and the terminal and file tools
    read the session's cwd record by task id, so concurrent turns of different sessions never see each
    other's workspace or approvals. Nothing process-wide (``os.chdir``, ``os.environ``) changes.
    """
    if scope is None:
        yield
        return
    key = scope.session_id
    task_id = str(agent.session_id)  # the tools' record key (``run_conversation(task_id=...)``)
    approval = _import("tools.approval")
    session_context = _import("gateway.session_context")
    is_interrupted = _import("tools.interrupt").is_interrupted
    _import("tools.terminal_tool").register_task_env_overrides(task_id, {"cwd": scope.workspace})

    def notify(data: dict) -> None:
        choice, reason = scope.ask_approval(data, is_interrupted)
        approval.resolve_gateway_approval(key, choice, reason=reason)

    tokens = session_context.set_session_vars(
        platform="webui",
        session_key=key,
        session_id=task_id,
        cwd=scope.workspace,
        async_delivery=False,
    )
    key_token = approval.set_current_session_key(key)
    (approval.enable_session_yolo if scope.yolo else approval.disable_session_yolo)(key)
    approval.register_gateway_notify(key, notify)
    agent.clarify_callback = lambda question, choices: scope.ask_clarify(question, choices, is_interrupted)
    try:
        yield
    finally:
        agent.clarify_callback = None
        approval.unregister_gateway_notify(key)
        approval.reset_current_session_key(key_token)
        session_context.clear_session_vars(tokens)


# ----------------------------------------------------------------------------------------------
# One turn
# ----------------------------------------------------------------------------------------------

# fmt: off
_USAGE_KEYS = ("input_tokens", "output_tokens", "prompt_tokens", "completion_tokens", "total_tokens",
               "cache_read_tokens", "cache_write_tokens", "reasoning_tokens", "estimated_cost_usd", "api_calls")
# fmt: on


@dataclass
class TurnResult:
    final_response: str = ""
    messages: list[dict] = field(default_factory=list)
    completed: bool = False
    failed: bool = False
    interrupted: bool = False
    error: str | None = None
    interrupt_message: str | None = None
    turn_exit_reason: str = ""
    session_id: str = ""  # agent.session_id after the turn
    previous_session_id: str = ""  # before the turn; differs when compaction rotated the session
    compressed: bool = False  # the agent compacted the context during this turn
    compression_count: int = 0
    compression_events: list[dict] = field(default_factory=list)
    usage: dict = field(default_factory=dict)
    last_prompt_tokens: int | None = None
    context_length: int | None = None
    threshold_tokens: int | None = None
    duration_s: float = 0.0
    raw: dict = field(default_factory=dict)  # the agent's result dict, untouched

    @property
    def rotated(self) -> bool:
        return bool(
            self.previous_session_id and self.session_id and self.session_id != self.previous_session_id
        )

    def to_dict(self) -> dict:
        """JSON-able summary (without ``raw``)."""
        out = {k: v for k, v in self.__dict__.items() if k != "raw"}
        out["rotated"] = self.rotated
        return out


def _compression_count(agent) -> int:
    try:
        return int(getattr(agent.context_compressor, "compression_count", 0) or 0)
    except Exception:
        return 0


def _int_or_none(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def summarize_result(
    raw: dict, agent, *, before_sid: str, before_count: int, compress_events: list[dict]
) -> TurnResult:
    """Pure-ish: the agent's result dict plus its post-turn attributes → ``TurnResult``."""
    compressor = getattr(agent, "context_compressor", None)
    after_sid = str(getattr(agent, "session_id", "") or raw.get("session_id") or "")
    count = _compression_count(agent)
    last_prompt = _int_or_none(raw.get("last_prompt_tokens"))
    if last_prompt is None and compressor is not None:
        last_prompt = _int_or_none(getattr(compressor, "last_prompt_tokens", None))
    error = raw.get("error")
    result = TurnResult(
        final_response=str(raw.get("final_response") or ""),
        messages=list(raw.get("messages") or []),
        completed=bool(raw.get("completed")),
        failed=bool(raw.get("failed")),
        interrupted=bool(raw.get("interrupted")),
        error=str(error) if error else None,
        interrupt_message=raw.get("interrupt_message") or None,
        turn_exit_reason=str(raw.get("turn_exit_reason") or ""),
        session_id=after_sid,
        previous_session_id=before_sid,
        compression_count=count,
        compression_events=compress_events,
        usage={k: raw[k] for k in _USAGE_KEYS if k in raw},
        last_prompt_tokens=last_prompt,
        context_length=_int_or_none(getattr(compressor, "context_length", None)),
        threshold_tokens=_int_or_none(getattr(compressor, "threshold_tokens", None)),
        raw=raw,
    )
    result.compressed = bool(compress_events) or count > before_count or result.rotated
    return result


class TurnRunner:
    """Runs one ``run_conversation`` in a worker thread; ``wait()`` returns its ``TurnResult``."""

    def __init__(
        self,
        agent,
        user_text: Any,
        history: list[dict] | None,
        on_event: OnEvent,
        *,
        persist_text: str | None = None,
        persist_timestamp: float | None = None,
        system_message: str | None = None,
        scope: TurnScope | None = None,
    ):
        self.agent = agent
        self.scope = scope
        self.user_text = user_text
        self.history = list(history or [])
        self.on_event = on_event
        self.persist_text = (
            persist_text if persist_text is not None else (user_text if isinstance(user_text, str) else None)
        )
        self.persist_timestamp = persist_timestamp
        self.system_message = system_message
        self.result: TurnResult | None = None
        self.done = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> TurnRunner:
        callbacks_for(self.agent).begin_turn(self.on_event)
        clear = getattr(self.agent, "clear_interrupt", None)
        if callable(clear):  # a cancel that arrived after the previous turn ended must not kill this one
            clear()
        self._thread = threading.Thread(target=self._run, name=f"turn-{self.agent.session_id}", daemon=True)
        self._thread.start()
        return self

    def wait(self, timeout: float | None = None) -> TurnResult | None:
        self.done.wait(timeout)
        return self.result

    def interrupt(self, message: str | None = None) -> None:
        """Stop the turn; a no-op once it has finished (a pending interrupt would hit the next turn)."""
        if not self.done.is_set():
            interrupt(self.agent, message)

    def _call_kwargs(self) -> dict:
        sid = self.agent.session_id
        kwargs = {
            "user_message": self.user_text,
            "system_message": self.system_message,
            "conversation_history": self.history,
            "task_id": sid,
            "persist_user_message": self.persist_text,
            "persist_user_timestamp": self.persist_timestamp,
        }
        kwargs = {k: v for k, v in kwargs.items() if v is not None or k == "conversation_history"}
        return _accepted_kwargs(self.agent.run_conversation, kwargs)

    def _run(self) -> None:
        callbacks = callbacks_for(self.agent)
        before_sid = str(getattr(self.agent, "session_id", "") or "")
        before_count = _compression_count(self.agent)
        started = time.monotonic()
        raw: dict
        try:
            with session_bound(self.agent, self.scope):
                raw = self.agent.run_conversation(**self._call_kwargs())
            if not isinstance(raw, dict):
                raw = {"final_response": str(raw or ""), "completed": True}
        except Exception as exc:  # the agent returns most errors; this is the rest
            log.exception("run_conversation raised")
            raw = {"failed": True, "completed": False, "error": f"{type(exc).__name__}: {exc}"}
        finally:
            compress_events = callbacks.end_turn()
        try:
            self.result = summarize_result(
                raw,
                self.agent,
                before_sid=before_sid,
                before_count=before_count,
                compress_events=compress_events,
            )
        except Exception as exc:
            log.exception("summarizing the turn failed")
            self.result = TurnResult(failed=True, error=f"{type(exc).__name__}: {exc}", raw=raw)
        self.result.duration_s = time.monotonic() - started
        self.done.set()


def run_turn(
    agent,
    user_text: Any,
    history: list[dict] | None,
    on_event: OnEvent,
    *,
    persist_timestamp: float | None = None,
    persist_text: str | None = None,
    system_message: str | None = None,
) -> TurnResult:
    """Run one turn to completion (in a worker thread) and return its result."""
    runner = TurnRunner(
        agent,
        user_text,
        history,
        on_event,
        persist_text=persist_text,
        persist_timestamp=persist_timestamp,
        system_message=system_message,
    ).start()
    result = runner.wait()
    assert result is not None
    return result

"""One turn of the agent: ``run_conversation`` in a worker thread bound to the session
(``api.agent.agent_binding``), its callbacks as events, and the agent's result as a ``TurnResult``.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from api.agent.agent_binding import TurnScope, session_bound
from api.agent.agent_events import OnEvent
from api.agent.agent_runtime import accepted_kwargs, callbacks_for, interrupt, steer, take_pending_steer

log = logging.getLogger(__name__)

# Events that come from a model request under way: a steer handed over after one reaches this turn's tools.
_MODEL_EVENTS = frozenset({"token", "reasoning", "tool", "tool_complete", "interim"})

# fmt: off
_USAGE_KEYS = ("input_tokens", "output_tokens", "prompt_tokens", "completion_tokens", "total_tokens",
               "cache_read_tokens", "cache_write_tokens", "reasoning_tokens", "estimated_cost_usd", "api_calls")
# fmt: on


def usage_counters(agent: Any) -> dict[str, float]:
    """The agent's running totals (``session_<key>``): they count from the agent's construction, and a
    pooled agent serves many turns."""
    counters: dict[str, float] = {}
    for key in _USAGE_KEYS:
        value = getattr(agent, f"session_{key}", None)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            counters[key] = value
    return counters


def turn_usage(raw: dict[str, Any], before: dict[str, float]) -> dict[str, float]:
    """This turn's usage: the agent's totals after the turn minus those before it (pure)."""
    usage: dict[str, float] = {}
    for key in _USAGE_KEYS:
        value = raw.get(key)
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            continue
        spent = value - before.get(key, 0)
        usage[key] = round(spent, 6) if isinstance(spent, float) else spent
    return usage


@dataclass
class TurnResult:
    final_response: str = ""
    messages: list[dict[str, Any]] = field(default_factory=list)
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
    compression_events: list[dict[str, Any]] = field(default_factory=list)
    usage: dict[str, Any] = field(default_factory=dict)
    last_prompt_tokens: int | None = None
    context_length: int | None = None
    threshold_tokens: int | None = None
    duration_s: float = 0.0
    pending_steer: str = ""  # steer text the turn ended without delivering (it runs as the next message)
    raw: dict[str, Any] = field(default_factory=dict)  # the agent's result dict, untouched

    @property
    def rotated(self) -> bool:
        return bool(
            self.previous_session_id and self.session_id and self.session_id != self.previous_session_id
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-able summary (without ``raw``)."""
        out = {k: v for k, v in self.__dict__.items() if k != "raw"}
        out["rotated"] = self.rotated
        return out


def _compression_count(agent: Any) -> int:
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
    raw: dict[str, Any],
    agent: Any,
    *,
    before_sid: str,
    before_count: int,
    compress_events: list[dict[str, Any]],
    before_usage: dict[str, float] | None = None,
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
        usage=turn_usage(raw, before_usage or {}),
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
        agent: Any,
        user_text: Any,
        history: list[dict[str, Any]] | None,
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
        # Steers: held until the model is first asked (the agent would put an earlier one into a tool
        # result of the history), refused once the turn has returned (none may reach a later turn).
        self._steer_lock = threading.Lock()
        self._asked = False
        self._held: list[str] = []
        self._closed = False

    def start(self) -> TurnRunner:
        callbacks_for(self.agent).begin_turn(self._on_event)
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
            with self._steer_lock:  # the agent drops a steer it holds when interrupted: keep it for the queue
                rescued = take_pending_steer(self.agent)
                if rescued:
                    self._held.append(rescued)
            interrupt(self.agent, message)

    def steer(self, text: str) -> bool:
        """Give ``text`` to this turn; False when it cannot take it (it ended, or the agent refused)."""
        with self._steer_lock:
            if self._closed or self.done.is_set():
                return False
            if not self._asked:
                self._held.append(text)
                return True
            return steer(self.agent, text)

    def _on_event(self, name: str, data: dict[str, Any]) -> None:
        if not self._asked and name in _MODEL_EVENTS:
            with self._steer_lock:
                self._asked = True
                held, self._held = self._held, []
                for text in held:
                    steer(self.agent, text)
        self.on_event(name, data)

    def _undelivered_steer(self, raw: dict[str, Any]) -> str:
        """Close the turn to steers; what it was handed but did not deliver, in order."""
        with self._steer_lock:
            self._closed = True
            texts = [*self._held, raw.get("pending_steer") or "", take_pending_steer(self.agent)]
            self._held = []
        return "\n".join(t for t in texts if isinstance(t, str) and t.strip())

    def _call_kwargs(self) -> dict[str, Any]:
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
        return accepted_kwargs(self.agent.run_conversation, kwargs)

    def _run(self) -> None:
        callbacks = callbacks_for(self.agent)
        before_sid = str(getattr(self.agent, "session_id", "") or "")
        before_count = _compression_count(self.agent)
        before_usage = usage_counters(self.agent)
        started = time.monotonic()
        raw: dict[str, Any]
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
        leftover = self._undelivered_steer(raw)
        try:
            self.result = summarize_result(
                raw,
                self.agent,
                before_sid=before_sid,
                before_count=before_count,
                compress_events=compress_events,
                before_usage=before_usage,
            )
        except Exception as exc:
            log.exception("summarizing the turn failed")
            self.result = TurnResult(failed=True, error=f"{type(exc).__name__}: {exc}", raw=raw)
        self.result.duration_s = time.monotonic() - started
        self.result.pending_steer = leftover
        self.done.set()


def run_turn(
    agent: Any,
    user_text: Any,
    history: list[dict[str, Any]] | None,
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

"""The agent's callbacks turned into ``(name, data)`` events for the current turn's sink.

Events (``on_event(name, data)``, called from agent threads, serialized by a lock):
``token {text}``, ``reasoning {text}``, ``tool {id, name, args}``,
``tool_complete {id, name, result, is_error, truncated}``, ``status {kind, message}``,
``compressing {message}``, ``interim {text, already_streamed}``, ``work {card}`` (a subagent's card as it
is now, ``api.rules.work_cards``).

hermes-agent is not imported here: the one verdict that needs it (did a tool fail, when the agent's
completion event carried no error flag) is ``AgentCallbacks.tool_failed``, which ``api.agent.agent_runtime`` (the
module that imports hermes-agent) overrides with hermes' own.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from api.rules import work_cards
from api.rules.errors import Conflict

log = logging.getLogger(__name__)

OnEvent = Callable[[str, dict[str, Any]], object]  # what a sink returns is not used

TOOL_RESULT_CAP = 8000  # characters of a tool result carried in a tool_complete event
_COMPACTION_MARKERS = ("Compacting context", "Preflight compression")
DELEGATE_TOOL = "delegate_task"  # the agent's tool whose children report through tool_progress


def _squash(text: str) -> str:
    return " ".join(text.split())


class AgentCallbacks:
    """The agent's callbacks, turned into events for the current turn's sink.

    One object per agent; ``begin_turn``/``end_turn`` swap the sink, so a cached agent serves many
    turns. Events fired after ``end_turn`` (by a lingering agent thread) are dropped.
    """

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._sink: OnEvent | None = None
        self._streamed: list[str] = []
        self._compressing_sent = False
        self._compress_events: list[dict[str, Any]] = []
        self._cards = work_cards.Cards()
        self._delegations: list[str] = []  # delegate_task calls running, oldest first
        # tool.completed carries is_error; the id-tagged tool_complete callback follows on the same thread
        self._tool_outcome = threading.local()

    def tool_failed(self, name: str, result: Any) -> bool:
        """Whether a tool result reads as a failure when the agent's event did not say; here: never."""
        return False

    # -- turn lifecycle ----------------------------------------------------------------------
    def begin_turn(self, on_event: OnEvent) -> None:
        with self._lock:
            if self._sink is not None:
                raise Conflict("a turn is already running on this agent")
            self._sink = on_event
            self._streamed = []
            self._compressing_sent = False
            self._compress_events = []
            self._cards = work_cards.Cards()
            self._delegations = []

    def end_turn(self) -> list[dict[str, Any]]:
        """Detach the sink; returns the ``session:compress`` payloads seen during the turn."""
        with self._lock:
            self._sink = None
            return list(self._compress_events)

    def emit(self, name: str, data: dict[str, Any]) -> None:
        with self._lock:
            sink = self._sink
            if sink is None:
                return
            try:
                sink(name, data)
            except Exception:  # a broken sink must never break the agent's turn
                log.exception("event sink failed on %s", name)

    def agent_kwargs(self) -> dict[str, Any]:
        return {
            "stream_delta_callback": self.on_stream_delta,
            "reasoning_callback": self.on_reasoning,
            "tool_progress_callback": self.on_tool_progress,
            "tool_start_callback": self.on_tool_start,
            "tool_complete_callback": self.on_tool_complete,
            "status_callback": self.on_status,
            "interim_assistant_callback": self.on_interim,
            "event_callback": self.on_agent_event,
        }

    def bind(self, agent: Any) -> None:
        """Point an existing agent's callback attributes at this object."""
        for attr, fn in self.agent_kwargs().items():
            setattr(agent, attr, fn)
        agent._talaria_callbacks = self

    # -- the agent's callbacks ---------------------------------------------------------------
    def on_stream_delta(self, text: str | None) -> None:
        if not text:  # None marks a segment end
            return
        with self._lock:
            self._streamed.append(text)
        self.emit("token", {"text": text})

    def on_reasoning(self, text: str | None) -> None:
        if text:
            self.emit("reasoning", {"text": text})

    def on_tool_progress(
        self, event_type: str, name: str = "", preview: Any = None, args: Any = None, **kw: Any
    ) -> None:
        if isinstance(event_type, str) and event_type.startswith("subagent."):
            self._subagent_event(event_type, name, preview, kw)
        elif event_type == "tool.completed":
            self._tool_outcome.last = (name, bool(kw.get("is_error")))
        elif event_type == "reasoning.available" and isinstance(preview, str) and preview.strip():
            with self._lock:
                streamed = _squash("".join(self._streamed))
            if _squash(preview) not in streamed:  # otherwise it only echoes the streamed answer
                self.emit("reasoning", {"text": preview})

    def _subagent_event(self, event_type: str, name: Any, preview: Any, extra: dict[str, Any]) -> None:
        with self._lock:
            # A child names its subagent, not the call that started it: the newest running delegation.
            tool_id = self._delegations[-1] if self._delegations else None
            card = self._cards.fold(event_type, name, preview, extra, tool_id, time.time())
        if card is not None:
            self.emit("work", card)

    def on_tool_start(self, tool_call_id: str, name: str, args: Any) -> None:
        if name == DELEGATE_TOOL:
            with self._lock:
                self._delegations.append(tool_call_id)
        self.emit("tool", {"id": tool_call_id, "name": name, "args": args})

    def on_tool_complete(self, tool_call_id: str, name: str, args: Any, result: Any) -> None:
        if name == DELEGATE_TOOL:
            with self._lock:
                if tool_call_id in self._delegations:
                    self._delegations.remove(tool_call_id)
        last = getattr(self._tool_outcome, "last", None)
        self._tool_outcome.last = None
        is_error = last[1] if last and last[0] == name else self.tool_failed(name, result)
        text = result if isinstance(result, str) else repr(result)
        data = {
            "id": tool_call_id,
            "name": name,
            "result": text[:TOOL_RESULT_CAP],
            "is_error": is_error,
            "truncated": len(text) > TOOL_RESULT_CAP,
        }
        self.emit("tool_complete", data)
        if name == work_cards.BACKGROUND_TOOL:
            card = work_cards.process_card(tool_call_id, args, result, time.time())
            if card is not None:
                self.emit("work", card)

    def on_status(self, kind: str, message: str = "") -> None:
        message = str(message or "")
        self.emit("status", {"kind": kind, "message": message})
        if any(marker in message for marker in _COMPACTION_MARKERS):
            with self._lock:
                first, self._compressing_sent = not self._compressing_sent, True
            if first:
                self.emit("compressing", {"message": message})

    def on_interim(self, text: str, already_streamed: bool = False, **_: Any) -> None:
        if text:
            self.emit("interim", {"text": text, "already_streamed": bool(already_streamed)})

    def on_agent_event(self, name: str, data: dict[str, Any] | None = None) -> None:
        if name == "session:compress":
            with self._lock:
                self._compress_events.append(dict(data or {}))

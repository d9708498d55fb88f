"""A stand-in ``AIAgent`` for unit tests of ``api.agent.agent_runtime`` and ``api.agent.agent_turn``: the parts a turn
and a manual compression use; a script decides what the turn does. The real agent: tests/integration.
"""

from __future__ import annotations

import threading


class Sink:
    def __init__(self):
        self.lock = threading.Lock()
        self.events: list[tuple[str, dict]] = []

    def __call__(self, name, data):
        with self.lock:
            self.events.append((name, data))

    def named(self, name):
        return [d for n, d in self.events if n == name]


class ScriptedCompressor:
    def __init__(self):
        self.compression_count = 0
        self.context_length = 65536
        self.threshold_tokens = 64000
        self.last_prompt_tokens = 1234
        self._last_compress_aborted = False
        self._last_summary_fallback_used = False

    def compress(self, messages, current_tokens=None, focus_topic=None):
        if len(messages) < 4:
            return messages
        self.compression_count += 1
        return [
            messages[0],
            {
                "role": "user",
                "content": "[CONTEXT COMPACTION — REFERENCE ONLY] s",
                "_compressed_summary": True,
            },
            messages[-1],
        ]


class ScriptedAgent:
    """Mimics the parts of AIAgent a turn uses; the script decides what the turn does."""

    def __init__(self, script=None, **kwargs):
        self.kwargs = kwargs
        self.session_id = kwargs.get("session_id", "sid")
        self.context_compressor = ScriptedCompressor()
        self.script = script or (
            lambda agent, **kw: {"final_response": "ok", "completed": True, "messages": []}
        )
        self.calls = []
        self.interrupted_with = "not called"

    def run_conversation(
        self,
        user_message,
        system_message=None,
        conversation_history=None,
        task_id=None,
        persist_user_message=None,
    ):
        self.calls.append(
            {
                "user_message": user_message,
                "history": conversation_history,
                "task_id": task_id,
                "persist": persist_user_message,
            }
        )
        return self.script(self, user_message=user_message)

    def interrupt(self, message=None):
        self.interrupted_with = message

"""A scripted stand-in for the agent inside ``api.services.streaming`` (for crash tests of a chat turn).

``install(monkeypatch)`` swaps ``api.agent.agent_runtime.build_agent`` and ``api.agent.agent_turn.TurnRunner`` for a scripted agent
and runner that stream ``ANSWER_TOKENS`` one by one (a few milliseconds apart) and then complete with
``ANSWER``; the checkpoint interval drops to 20 ms, so a turn checkpoints several times.
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections.abc import Iterator

USER_TEXT = "please answer durably"
ANSWER_TOKENS = [f"tok{i} " for i in range(24)]
ANSWER = "".join(ANSWER_TOKENS)
TOKEN_DELAY_S = 0.006


class ScriptedAgent:
    def __init__(self, session_id: str):
        self.session_id = session_id
        self.context_compressor = None


def build_agent(session_id, model=None, provider=None, **kwargs) -> ScriptedAgent:
    return ScriptedAgent(session_id)


class ScriptedTurnRunner:
    def __init__(
        self,
        agent,
        user_text,
        history,
        on_event,
        *,
        persist_text=None,
        persist_timestamp=None,
        system_message=None,
        scope=None,
    ):
        self.agent = agent
        self.user_text = user_text
        self.history = list(history or [])
        self.on_event = on_event
        self.result = None
        self.done = threading.Event()
        self._stop = threading.Event()

    def start(self) -> ScriptedTurnRunner:
        threading.Thread(target=self._run, name="fake-turn", daemon=True).start()
        return self

    def _run(self) -> None:
        from api.agent.agent_turn import TurnResult

        sent = []
        for tok in ANSWER_TOKENS:
            if self._stop.is_set():
                break
            self.on_event("token", {"text": tok})
            sent.append(tok)
            time.sleep(TOKEN_DELAY_S)
        interrupted = self._stop.is_set()
        text = "".join(sent)
        rows = [
            *self.history,
            {"role": "user", "content": self.user_text},
            {"role": "assistant", "content": text},
        ]
        self.result = TurnResult(
            final_response=text, messages=rows, completed=not interrupted, interrupted=interrupted
        )
        self.done.set()

    def wait(self, timeout=None):
        self.done.wait(timeout)
        return self.result

    def interrupt(self, message=None) -> None:
        self._stop.set()


def install(monkeypatch) -> None:
    from api.agent import agent_runtime, agent_turn
    from api.store import config as api_config

    monkeypatch.setattr(agent_runtime, "build_agent", build_agent)
    monkeypatch.setattr(agent_turn, "TurnRunner", ScriptedTurnRunner)
    monkeypatch.setattr(agent_runtime, "close_agent", lambda agent: None)
    monkeypatch.setitem(api_config.SETTINGS_VALUES, "checkpoint_interval", 0.02)
    # The stand-in agent has no tools, so no turn asks the agent's own configuration for its defaults.
    monkeypatch.setitem(api_config.SETTINGS_VALUES, "agent_toolsets", "none")
    # The stand-in lives in this process: turns run as its threads, not in a worker process.
    monkeypatch.setitem(api_config.SETTINGS_VALUES, "agent_workers", 0)


@contextlib.contextmanager
def live_turn(session) -> Iterator[object]:
    """``session`` as while a turn of this process streams in it: pending on disk and live in the journal."""
    from api.agent import turn_journal

    turn = turn_journal.Turn(uuid.uuid4().hex, session.session_id)
    session.active_stream_id = turn.stream_id
    session.save()
    turn_journal.start(turn)
    try:
        yield turn
    finally:
        turn.finish()
        turn_journal.end(turn)

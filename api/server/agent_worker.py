"""An agent worker process: runs the agent's turns the server sends it and streams their events back.

Started by ``api.agent.worker_proc`` as ``python -m api.server.agent_worker <fd>`` at a lower CPU priority, it speaks
``api.agent.worker_frames`` over the socket ``fd``. The server sends the settings (``hello``), then turns (the
model context, the session's agent spec, workspace and yolo switch), answers to the questions a turn asks,
interrupts, ``warm`` (build an agent ahead of its turn), ``forget`` (the agent's config changed) and
``stop``. The worker keeps its own idle agents (``api.agent.agent_pool``), binds each turn's thread to its
session (``api.agent.agent_binding``) and asks the person through the server, blocking the agent's callback on
the answer as the in-process binding does. It writes no session file: the events and the result go back,
and the server decides what is saved. A heartbeat says it is alive; a closed socket (the server is gone)
ends it.
"""

from __future__ import annotations

import logging
import os
import shutil
import socket
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from api.agent import (
    agent_binding,
    agent_calls,
    agent_pool,
    agent_runtime,
    agent_turn,
    mcp_servers,
    provider_errors,
    turn_batches,
    worker_frames,
)
from api.rules.errors import ApiError
from api.server import log_setup
from api.store import config as _config

log = logging.getLogger("talaria.agent_worker")

NICENESS = 10  # below the server's priority: request handling wins the CPU over the agents' work
_ANSWER_GRACE_S = 30.0  # past the question's own deadline, the server's answer is taken as never coming


@dataclass
class _Waiting:
    answered: threading.Event = field(default_factory=threading.Event)
    value: Any = None


class Worker:
    def __init__(self, channel: worker_frames.Channel):
        self.channel = channel
        self._lock = threading.Lock()
        self._runners: dict[str, agent_turn.TurnRunner] = {}
        self._stopped: dict[str, str] = {}  # turn id → the interrupt message that arrived for it
        self._waiting: dict[str, _Waiting] = {}
        self._early_steers: dict[str, list[str]] = {}  # turn id → steers that came before its agent was built
        self._ended = threading.Event()
        # A turn's tokens travel in batches: a frame per token kept the server's reader behind the workers.
        self.batches = turn_batches.Batches(channel.send, float(_config.setting("token_batch_interval")))

    # ------------------------------------------------------------------ the loop

    def serve(self) -> None:
        threading.Thread(target=self._beat, name="heartbeat", daemon=True).start()
        while True:
            frame = self.channel.receive()
            if frame is None:  # the server is gone: nobody is left to send a result to
                break
            if frame.get("op") == "stop":
                self._ended.set()
                self._stop_turns()
                break
            self._dispatch(frame)
        self._ended.set()
        self.batches.stop()

    def _dispatch(self, frame: dict[str, Any]) -> None:
        op = frame.get("op")
        if op == "turn":
            with self._lock:  # before any steer for it can be read: this loop reads frames in order
                self._early_steers[frame["id"]] = []
            threading.Thread(
                target=self._turn, args=(frame,), name=f"turn-{frame['id'][:8]}", daemon=True
            ).start()
        elif op == "answer":
            with self._lock:
                waiting = self._waiting.get(frame.get("qid", ""))
            if waiting is not None:
                waiting.value = frame.get("value")
                waiting.answered.set()
        elif op == "steer":
            self._steer(frame)
        elif op == "call":
            threading.Thread(
                target=self._call, args=(frame,), name=f"call-{frame.get('name')}", daemon=True
            ).start()
        elif op == "interrupt":
            self._interrupt(frame["id"], str(frame.get("message") or "Stopped by the user"))
        elif op == "warm":
            spec = frame.get("spec")
            agent_pool.start_warm_up(lambda: spec)
        elif op == "forget":
            agent_pool.forget_idle_agents()
        elif op == "leave_environment":  # its host was lost: the next command connects afresh
            threading.Thread(target=leave_environment, name="leave-environment", daemon=True).start()

    def _beat(self) -> None:
        interval = max(0.1, float(_config.setting("worker_deadline")) / 4)
        while not self._ended.wait(interval):
            if not self.channel.send({"op": "beat"}):
                return

    def _steer(self, frame: dict[str, Any]) -> None:
        """Hand a steer to the running agent (``TurnRunner.steer``); one for a turn whose agent is still
        being built waits for it, as the runner holds one that comes before the model is asked."""
        turn_id, text = str(frame.get("id") or ""), str(frame.get("text") or "")
        with self._lock:
            runner = self._runners.get(turn_id)
            early = self._early_steers.get(turn_id) if runner is None else None
            if early is not None:
                early.append(text)
        ok = early is not None or (runner is not None and runner.steer(text))
        self.channel.send({"op": "steered", "id": turn_id, "qid": frame.get("qid"), "ok": ok})

    def _call(self, frame: dict[str, Any]) -> None:
        """Run a side call (``api.agent.agent_calls``) and send its value, or what failed."""
        reply: dict[str, Any] = {"op": "called", "qid": frame.get("qid")}
        try:
            reply["value"] = agent_calls.run(str(frame.get("name")), dict(frame.get("args") or {}))
        except agent_runtime.ProviderNotConfigured as exc:
            reply["error"] = {"kind": "not_configured", "message": exc.message}
        except Exception as exc:  # noqa: BLE001 - the server hears every failure; the worker goes on
            log.exception("side call %s failed", frame.get("name"))
            reply["error"] = {"kind": "failed", "message": f"{type(exc).__name__}: {exc}"}
        self.channel.send(reply)

    def _interrupt(self, turn_id: str, message: str) -> None:
        self.batches.before_frame(turn_id)  # what streamed before the stop reaches the server now
        with self._lock:
            self._stopped[turn_id] = message
            runner = self._runners.get(turn_id)
        if runner is not None:
            runner.interrupt(message)

    def _stop_turns(self) -> None:
        """The server stops this worker: every running turn is interrupted and given a moment to return."""
        with self._lock:
            runners = list(self._runners.values())
            waiting = list(self._waiting.values())
        for runner in runners:
            runner.interrupt("Talaria is shutting down")
        for question in waiting:  # nobody will answer: an approval is denied, a clarify unanswered
            question.answered.set()
        self.batches.flush_all()
        deadline = time.monotonic() + 5.0
        for runner in runners:
            runner.done.wait(max(0.0, deadline - time.monotonic()))
        self.batches.flush_all()

    # ------------------------------------------------------------------ one turn

    def _ask(self, turn_id: str, kind: str, data: dict[str, Any], interrupted: Callable[[], bool]) -> Any:
        """Ask the person through the server and block until it answers (or says nobody did)."""
        qid = uuid.uuid4().hex
        waiting = _Waiting()
        with self._lock:
            self._waiting[qid] = waiting
        try:
            self.batches.before_frame(turn_id)  # the question comes after the text that led to it
            self.channel.send({"op": "ask", "id": turn_id, "qid": qid, "kind": kind, "data": data})
            setting = "approval_timeout" if kind == "approval" else "clarify_timeout"
            waiting.answered.wait(float(_config.setting(setting)) + _ANSWER_GRACE_S)
        finally:
            with self._lock:
                self._waiting.pop(qid, None)
        return waiting.value

    def _scope(self, turn_id: str, frame: dict[str, Any]) -> agent_binding.TurnScope:
        def ask_approval(data: dict[str, Any], interrupted: Callable[[], bool]) -> tuple[str, str | None]:
            value = self._ask(turn_id, "approval", data, interrupted)
            if isinstance(value, list) and len(value) == 2 and isinstance(value[0], str):
                return value[0], value[1]
            return "deny", "Talaria denied it: no answer reached the agent"

        def ask_clarify(question: str, choices: list[Any] | None, interrupted: Callable[[], bool]) -> str:
            value = self._ask(turn_id, "clarify", {"question": question, "choices": choices}, interrupted)
            return value if isinstance(value, str) else "[The person did not answer this question.]"

        return agent_binding.TurnScope(
            session_id=frame["spec"]["session_id"],
            workspace=frame["workspace"],
            ask_approval=ask_approval,
            ask_clarify=ask_clarify,
            yolo=bool(frame.get("yolo")),
        )

    def _turn(self, frame: dict[str, Any]) -> None:
        """Run one turn and send its result; whatever fails, the server hears how the turn ended."""
        turn_id = frame["id"]
        try:
            self._send_turn_end(turn_id, frame)
        finally:
            with self._lock:
                self._early_steers.pop(turn_id, None)

    def _send_turn_end(self, turn_id: str, frame: dict[str, Any]) -> None:
        ended: dict[str, Any]
        try:
            ended = self._run(turn_id, frame)
        except agent_runtime.ProviderNotConfigured as exc:
            ended = {"failure": [exc.message, True]}
        except ApiError as exc:
            ended = {"failure": [exc.message, False]}
        except Exception as exc:  # noqa: BLE001 - any failure becomes the turn's error, never a lost turn
            log.exception("turn %s failed", turn_id)
            ended = {"failure": [f"The turn failed: {type(exc).__name__}: {exc}", False]}
        self.batches.close(turn_id)  # every event of the turn goes before its result
        try:
            self.channel.send({"op": "result", "id": turn_id, **ended})
        except Exception as exc:  # noqa: BLE001 - a result that cannot be sent still ends the turn
            log.exception("sending the result of turn %s failed", turn_id)
            failure = [f"The turn failed: {type(exc).__name__}: {exc}", False]
            self.channel.send({"op": "result", "id": turn_id, "failure": failure})

    def _run(self, turn_id: str, frame: dict[str, Any]) -> dict[str, Any]:
        key, agent = agent_pool.take_spec(frame["spec"])
        runner = agent_turn.TurnRunner(
            agent,
            agent_runtime.user_content(agent, frame["text"], list(frame.get("image_paths") or [])),
            frame["history"],
            self.batches.emit(turn_id),
            persist_text=frame["text"],
            persist_timestamp=frame.get("user_ts"),
            scope=self._scope(turn_id, frame),
        )
        with self._lock:
            self._runners[turn_id] = runner
            stopped = turn_id in self._stopped
            early = self._early_steers.pop(turn_id, [])
        for text in early:  # held by the runner until the model is first asked
            runner.steer(text)
        try:
            if not stopped:
                runner.start()
                with self._lock:  # a stop between the check above and start() was cleared by start()
                    stopped = turn_id in self._stopped
                if stopped:
                    runner.interrupt(self._stopped[turn_id])
                runner.done.wait()
            result = runner.result
            if result is not None and result.error:  # say what to do about a refused URL, key or model
                result.error = provider_errors.explain(result.error, provider_errors.endpoint_of(agent))
            fields = None if result is None else dict(result.__dict__)
            return {"result": fields, "runtime": agent_runtime.main_runtime(agent)}
        finally:
            with self._lock:
                self._runners.pop(turn_id, None)
                stopped = self._stopped.pop(turn_id, None) is not None
            interrupted = bool(runner.result and runner.result.interrupted)
            agent_pool.release(key, agent, runner if runner.done.is_set() else None, stopped or interrupted)


ENVIRONMENT_TEMP_PREFIX = "talaria-env-"
# A Unix socket's path holds at most 104 bytes on macOS (108 on Linux). The agent's SSH master socket under
# the worker's temp folder adds "/hermes-ssh/", a 16-character name, ".sock" and ssh's own 17-character suffix.
SOCKET_PATH_MAX = 104
_SOCKET_UNDER_TEMP = len("/hermes-ssh/") + 16 + len(".sock") + 17
_TEMP_FOLDER_CHARS = len("/" + ENVIRONMENT_TEMP_PREFIX) + 8  # mkdtemp's random part


def socket_temp_base(base: str, fallback: str = "/tmp") -> str:
    """Where the worker's own temp folder goes: ``base``, unless a socket under it would be too long for a
    Unix socket (a deep ``TMPDIR``, as macOS gives), then ``fallback`` when that is a folder."""
    if len(os.fsencode(base)) + _TEMP_FOLDER_CHARS + _SOCKET_UNDER_TEMP <= SOCKET_PATH_MAX:
        return base
    return fallback if os.path.isdir(fallback) else base


def use_environment(terminal: dict[str, Any]) -> None:
    """Put this process's terminal and file tools in one execution environment, the way the agent's own
    launchers do: its ``terminal.*`` keys become the ``TERMINAL_*`` variables its tools read (an explicit
    ``TERMINAL_ENV`` also stops the agent from bridging ``terminal.backend`` from config.yaml). The whole
    process serves this environment alone, so no command of it can land on another session's host."""
    config_module = agent_runtime.agent_module("hermes_cli.config")
    config_module.apply_terminal_config_to_env(env=os.environ, config={"terminal": terminal}, override=True)
    # The agent keys its SSH master connection by user@host:port under the temp folder; a folder of this
    # process's own keeps the server's probes ("Test connection", a folder check) from closing it mid-command.
    tempfile.tempdir = tempfile.mkdtemp(
        prefix=ENVIRONMENT_TEMP_PREFIX, dir=socket_temp_base(tempfile.gettempdir())
    )
    log.info("agent worker %d runs its tools in %s", os.getpid(), terminal.get("backend"))


def leave_environment() -> None:
    """Tear down what the agent keeps open there (an SSH master connection outlives its process otherwise)."""
    terminal_tool = sys.modules.get("tools.terminal_tool")
    if terminal_tool is None:
        return
    try:
        terminal_tool.cleanup_all_environments()
    except Exception:  # noqa: BLE001 - the process ends anyway; the log says what was left
        log.warning("tearing down the agent's environment failed", exc_info=True)


# How long a new worker waits for its first MCP discovery before it takes turns (a slow server's tools
# arrive later, between turns, as in the server).
MCP_FIRST_ROUND_S = 15.0


def discover_mcp_tools(wait_s: float = MCP_FIRST_ROUND_S) -> None:
    """Run the person's MCP discovery in this process: the agent registers a server's tools in the process
    that connected to it, so each worker discovers (and follows changes of the section) as the server does."""
    mcp_servers.start_discovery()
    mcp_servers.DISCOVERY.get().settled.wait(wait_s)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    sock = socket.socket(fileno=int(args[0]))
    channel = worker_frames.Channel(sock)
    hello = channel.receive()
    if hello is None or hello.get("op") != "hello":
        return 1
    _config.configure(hello["settings"])
    log_setup.configure_logging(str(hello["settings"].get("log_level") or "INFO"), None)
    terminal = hello.get("terminal")
    if isinstance(terminal, dict):
        use_environment(terminal)
    try:
        os.nice(NICENESS)
    except OSError:  # a priority that cannot be lowered leaves the worker as it is
        log.warning("could not lower the agent worker's CPU priority")
    discover_mcp_tools()
    log.info("agent worker %d ready", os.getpid())
    channel.send({"op": "ready"})
    Worker(channel).serve()
    channel.close()
    mcp_servers.DISCOVERY.get().stop(timeout=5.0)
    if isinstance(terminal, dict):
        leave_environment()
        shutil.rmtree(tempfile.gettempdir(), ignore_errors=True)
    log.info("agent worker %d stopped", os.getpid())
    # The agent's threads (tool runs, a lingering model call) are daemons: the process ends with this one.
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())

"""Agent turns in worker processes: the pool of ``api.server.agent_worker`` processes and a turn run in one.

With ``agent_workers`` > 0, a turn's agent runs in one of that many worker processes (a lower CPU priority,
its own idle agents); the server keeps the store, HTTP, SSE and every decision about what is saved.
``start_turn`` sends the worker the model context and the session's agent spec and returns a
``RemoteRunner``, which ``api.services.streaming`` drives as it drives an in-process ``TurnRunner``: its events go to
the turn's sink, a question the agent asks is put to the person here (``api.services.turn_scope``'s approval and
clarify) and the answer sent back, ``interrupt`` reaches the agent, and the result comes back as a
``TurnResult``.

A worker that exits mid-turn (a crash, a kill) ends its turns as lost: ``RemoteRunner.lost`` and no
result, which the turn saves as interrupted with what had streamed. A worker that says nothing (no event,
no heartbeat) for ``worker_deadline`` seconds is killed, and so ends the same way. A worker is retired
after ``worker_max_turns`` turns or ``worker_idle_seconds`` idle, and a fresh one takes its place.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from api.agent import agent_binding, agent_calls, agent_pool, agent_runtime, agent_turn
from api.agent.agent_events import OnEvent
from api.agent.worker_proc import WorkerProc
from api.rules.errors import ApiError
from api.store import config as _config
from api.store import models
from api.store.in_use import InUse

log = logging.getLogger("talaria.worker_pool")

_WATCH_S = 0.25  # how often deadlines and idle workers are looked at
_SETTLE_S = 10.0  # what a question of a lost turn may take to be settled and erased
_STEER_S = 5.0  # what a worker may take to say whether the running agent took a steer
SIDE_CALL_S = 300.0  # what a side call (a title, a compression's summary) may take in a worker


def enabled() -> bool:
    return int(_config.setting("agent_workers")) > 0


class _Reply:
    """The answer to one request sent to a worker (a steer, a side call), awaited by the sender."""

    def __init__(self) -> None:
        self.qid = uuid.uuid4().hex
        self._event = threading.Event()
        self.value: Any = None
        self.error: dict[str, Any] | None = None

    def set(self, value: Any, error: dict[str, Any] | None = None) -> None:
        self.value, self.error = value, error
        self._event.set()

    def wait(self, timeout: float) -> bool:
        """Whether the answer came in time."""
        return self._event.wait(timeout)


class RemoteRunner:
    """A turn running in a worker process; the ``TurnRunner`` surface ``api.services.streaming`` uses."""

    def __init__(self, request: dict[str, Any], on_event: OnEvent, scope: agent_binding.TurnScope):
        self.id = uuid.uuid4().hex
        self.request = request
        self.on_event = on_event
        self.scope = scope
        self.result: agent_turn.TurnResult | None = None
        self.main_runtime: dict[str, Any] | None = None  # the agent's runtime, for the title call
        self.failure: tuple[str, bool] | None = None  # (message, needs setup) when no agent could be built
        self.lost = False  # the worker ended before the turn did
        self.done = threading.Event()
        self.worker: WorkerProc | None = None
        self._interrupted: str | None = None
        self._asking: list[threading.Thread] = []
        self._steer_lock = threading.Lock()
        self._steers: dict[str, _Reply] = {}

    def interrupt(self, message: str | None = None) -> None:
        if self.done.is_set():
            return
        self._interrupted = message or "Stopped"
        if self.worker is not None:
            self.worker.send({"op": "interrupt", "id": self.id, "message": self._interrupted})

    def steer(self, text: str) -> bool:
        """Hand ``text`` to the agent in its worker (its own steer); False when the turn cannot take it."""
        if self.done.is_set() or self.worker is None:
            return False
        reply = _Reply()
        with self._steer_lock:
            self._steers[reply.qid] = reply
        try:
            sent = self.worker.send({"op": "steer", "id": self.id, "qid": reply.qid, "text": text})
            return sent and reply.wait(_STEER_S) and reply.value is True
        finally:
            with self._steer_lock:
                self._steers.pop(reply.qid, None)

    def steered(self, frame: dict[str, Any]) -> None:
        with self._steer_lock:
            reply = self._steers.get(str(frame.get("qid") or ""))
        if reply is not None:
            reply.set(bool(frame.get("ok")))

    def interrupted(self) -> bool:
        """Whether a question the turn asks is moot: the turn was stopped or its worker is gone."""
        return self.lost or self._interrupted is not None

    def answer(self, qid: str, kind: str, data: dict[str, Any]) -> None:
        """Put the agent's question to the person (blocking this thread) and send the answer back."""
        value: Any
        if kind == "approval":
            value = list(self.scope.ask_approval(data, self.interrupted))
        else:
            value = self.scope.ask_clarify(
                str(data.get("question") or ""), data.get("choices"), self.interrupted
            )
        if self.worker is not None:
            self.worker.send({"op": "answer", "qid": qid, "value": value})

    def finish(self, frame: dict[str, Any]) -> None:
        fields = frame.get("result")
        if isinstance(fields, dict):
            known = {k: v for k, v in fields.items() if k in agent_turn.TurnResult.__dataclass_fields__}
            self.result = agent_turn.TurnResult(**known)
        failure = frame.get("failure")
        if isinstance(failure, list) and len(failure) == 2:
            self.failure = (str(failure[0]), bool(failure[1]))
        runtime = frame.get("runtime")
        self.main_runtime = runtime if isinstance(runtime, dict) else None
        self.done.set()

    def ask(self, qid: str, kind: str, data: dict[str, Any]) -> None:
        thread = threading.Thread(
            target=self.answer, args=(qid, kind, data), name=f"ask-{self.id[:8]}", daemon=True
        )
        self._asking = [t for t in self._asking if t.is_alive()] + [thread]
        thread.start()

    def lose(self) -> None:
        """The worker ended: a question still open is settled (an approval as deny) and erased from the
        session file before the turn ends, so the transcript says what was left unanswered."""
        self.lost = True
        with self._steer_lock:
            for reply in self._steers.values():
                reply.set(False)
        for thread in self._asking:
            thread.join(_SETTLE_S)
        self.done.set()


class WorkerPool:
    def __init__(self, terminal: dict[str, Any] | None = None, size: Callable[[], int] | None = None) -> None:
        # One execution environment's pool (``api.services.environment_workers``) gives its workers that environment's
        # terminal keys and its own size; the main pool keeps the agent's configuration and ``agent_workers``.
        self._terminal = terminal
        self._size = size or (lambda: int(_config.setting("agent_workers")))
        self._lock = threading.Lock()
        self._workers: list[WorkerProc] = []
        self._turns: dict[str, RemoteRunner] = {}
        self._affinity: dict[str, WorkerProc] = {}  # session id → the worker holding its idle agent
        self._calls: dict[str, tuple[WorkerProc, _Reply]] = {}  # side calls under way, by request id
        self._stopping = False
        self._watcher: threading.Thread | None = None
        self._warm_spec: Callable[[], dict[str, Any] | None] | None = (
            None  # set by warm_up: fresh workers warm too
        )

    # ------------------------------------------------------------------ turns

    def start(self, runner: RemoteRunner) -> None:
        sid = runner.request["spec"]["session_id"]
        with self._lock:
            if self._stopping:
                raise RuntimeError("the agent workers are stopping")
            worker = self._pick_locked(sid)
            worker.live.add(runner.id)
            self._turns[runner.id] = runner
            self._affinity[sid] = worker
            runner.worker = worker
        if not worker.send({"op": "turn", "id": runner.id, **runner.request}):
            self._end_turn(worker, runner.id)
            runner.lose()

    def _pick_locked(self, session_id: str) -> WorkerProc:
        usable = [w for w in self._workers if not w.retiring and not w.exited.is_set()]
        preferred = self._affinity.get(session_id)
        if preferred in usable:
            return preferred
        least_busy = min(usable, key=lambda w: len(w.live), default=None)
        # Another process only while every worker is busy: a server that runs one turn at a time (most
        # tests, a person alone) pays for one worker's start.
        if least_busy is not None and not least_busy.live:
            return least_busy
        if len(usable) < self._size():
            return self._spawn_locked()
        assert least_busy is not None  # agent_workers > 0 here: at least one worker is usable
        return least_busy

    def _spawn_locked(self) -> WorkerProc:
        worker = WorkerProc.spawn(self._on_frame, self._on_exit, self._terminal)
        self._workers.append(worker)
        if self._warm_spec is not None:
            worker.send({"op": "warm", "spec": self._warm_spec()})
        if self._watcher is None:
            self._watcher = threading.Thread(target=self._watch, name="worker-watch", daemon=True)
            self._watcher.start()
        return worker

    def call(self, name: str, args: dict[str, Any], timeout: float = SIDE_CALL_S) -> Any:
        """Run the side call ``name`` (``api.agent.agent_calls``) in a worker and return its value; its failure
        is raised here (the agent's missing provider as ``ProviderNotConfigured``)."""
        with self._lock:
            if self._stopping:
                raise ApiError("Talaria is shutting down", status=503)
            usable = [w for w in self._workers if not w.retiring and not w.exited.is_set()]
            least_busy = min(usable, key=lambda w: len(w.live), default=None)
            worker = least_busy if least_busy is not None else self._spawn_locked()
        return self._call_on(worker, name, args, timeout)

    def call_each(self, name: str, args: dict[str, Any], timeout: float = _STEER_S) -> list[Any]:
        """The side call ``name`` in every running worker (state one of them holds, such as its agent's
        background processes): the values of those that answered; none is started for it."""
        with self._lock:
            workers = [w for w in self._workers if not w.exited.is_set()]
        values = []
        for worker in workers:
            try:
                values.append(self._call_on(worker, name, args, timeout))
            except ApiError:
                continue  # ended or slow: what it held is not known here
        return values

    def _call_on(self, worker: WorkerProc, name: str, args: dict[str, Any], timeout: float) -> Any:
        reply = _Reply()
        with self._lock:
            self._calls[reply.qid] = (worker, reply)
        try:
            if not worker.send({"op": "call", "qid": reply.qid, "name": name, "args": args}):
                reply.set(None, {"message": "the agent's worker process ended"})
            if not reply.wait(timeout):
                raise ApiError(f"The agent's {name} call took longer than {timeout:.0f} s", status=504)
        finally:
            with self._lock:
                self._calls.pop(reply.qid, None)
        if reply.error is not None:
            if reply.error.get("kind") == "not_configured":
                raise agent_runtime.ProviderNotConfigured(str(reply.error.get("message") or ""))
            raise ApiError(str(reply.error.get("message") or "the side call failed"), status=502)
        return reply.value

    def _on_frame(self, worker: WorkerProc, frame: dict[str, Any]) -> None:
        op = frame.get("op")
        if op in ("beat", "ready"):
            return
        if op == "called":
            with self._lock:
                pending = self._calls.get(str(frame.get("qid") or ""))
            if pending is not None:
                pending[1].set(frame.get("value"), frame.get("error"))
            return
        runner = self._turns.get(str(frame.get("id") or ""))
        if runner is None:
            return
        if op == "event":
            runner.on_event(str(frame.get("name")), frame.get("data") or {})
        elif op == "ask":
            runner.ask(str(frame.get("qid")), str(frame.get("kind")), frame.get("data") or {})
        elif op == "steered":
            runner.steered(frame)
        elif op == "result":
            self._end_turn(worker, runner.id)
            runner.finish(frame)

    def _end_turn(self, worker: WorkerProc, turn_id: str) -> None:
        retire = None
        with self._lock:
            self._turns.pop(turn_id, None)
            worker.live.discard(turn_id)
            worker.served += 1
            worker.idle_since = time.monotonic()
            if worker.served >= int(_config.setting("worker_max_turns")) and not worker.retiring:
                worker.retiring = True
                log.info("agent worker %d served %d turns; recycling it", worker.pid, worker.served)
            if worker.retiring and not worker.live:
                retire = worker
        if retire is not None:
            self._retire(retire)

    def _on_exit(self, worker: WorkerProc) -> None:
        with self._lock:
            lost = [self._turns.pop(turn_id) for turn_id in list(worker.live) if turn_id in self._turns]
            worker.live.clear()
            if worker in self._workers:
                self._workers.remove(worker)
            for sid in [sid for sid, w in self._affinity.items() if w is worker]:
                del self._affinity[sid]
            replace = self._warm_spec is not None and not self._stopping and not worker.retiring
            calls = [reply for w, reply in self._calls.values() if w is worker]
        for reply in calls:
            reply.set(None, {"message": "the agent's worker process ended during the call"})
        if lost:
            log.warning(
                "agent worker %d ended (exit code %s) during %d turn(s)",
                worker.pid,
                worker.proc.poll(),
                len(lost),
            )
        for runner in lost:
            runner.lose()
        if replace:
            self._replace()

    def _retire(self, worker: WorkerProc) -> None:
        with self._lock:
            if worker in self._workers:
                self._workers.remove(worker)
            for sid in [sid for sid, w in self._affinity.items() if w is worker]:
                del self._affinity[sid]
        threading.Thread(target=worker.stop, name=f"retire-{worker.pid}", daemon=True).start()
        self._replace()

    def _replace(self) -> None:
        """A warm worker in the place of one that ended (only once the pool was warmed: otherwise on demand)."""
        with self._lock:
            if self._stopping or self._warm_spec is None:
                return
            usable = [w for w in self._workers if not w.retiring and not w.exited.is_set()]
            if len(usable) < self._size():
                self._spawn_locked()

    # ------------------------------------------------------------------ deadlines, idle, warm-up, stop

    def _watch(self) -> None:
        while True:
            time.sleep(_WATCH_S)
            with self._lock:
                if self._stopping:
                    return
                workers = list(self._workers)
            deadline = float(_config.setting("worker_deadline"))
            idle_s = float(_config.setting("worker_idle_seconds"))
            now = time.monotonic()
            for worker in workers:
                silent = worker.silent_for(now, deadline)
                if silent is not None:
                    log.warning("agent worker %d said nothing for %.1f s; killing it", worker.pid, silent)
                    worker.kill()
                elif (
                    not worker.live
                    and worker.served
                    and not worker.retiring
                    and now - worker.idle_since > idle_s
                ):
                    log.info(
                        "agent worker %d idle for %.0f s; recycling it", worker.pid, now - worker.idle_since
                    )
                    worker.retiring = True
                    self._retire(worker)

    def warm_up(self, find_spec: Callable[[], dict[str, Any] | None] = agent_pool.latest_spec) -> None:
        """Start the workers now, each building the agent ``find_spec`` names, so a first turn finds it
        ready; from now on a worker started in another's place warms up too."""
        with self._lock:
            if self._stopping:
                return
            self._warm_spec = find_spec
            spec = find_spec()
            usable = [w for w in self._workers if not w.retiring and not w.exited.is_set()]
            for worker in usable:
                worker.send({"op": "forget"})
                worker.send({"op": "warm", "spec": spec})
            for _ in range(self._size() - len(usable)):
                self._spawn_locked()

    def forget_idle_agents(self) -> None:
        """The agent's configuration changed: the workers drop their idle agents (and warm a fresh one)."""
        if self._warm_spec is not None:
            self.warm_up(self._warm_spec)
            return
        with self._lock:
            workers = list(self._workers)
        for worker in workers:
            worker.send({"op": "forget"})

    def pids(self) -> list[int]:
        with self._lock:
            return [w.pid for w in self._workers]

    def stop(self) -> None:
        """Stop every worker (their turns interrupted); those that do not end in time are killed."""
        with self._lock:
            self._stopping = True
            workers = list(self._workers)
        threads = [threading.Thread(target=w.stop, daemon=True) for w in workers]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()


# The main pool: the app's (``App.workers``), else built on first use. An environment's pools are apart
# (``api.services.environment_workers``).
POOL: InUse[WorkerPool] = InUse(WorkerPool)


def start_turn(
    session: models.Session,
    turn_text: str,
    image_paths: list[str],
    history: list[dict[str, Any]],
    user_ts: float,
    on_event: OnEvent,
    scope: agent_binding.TurnScope,
    pool: WorkerPool | None = None,
) -> RemoteRunner:
    """Send a turn to a worker of ``pool`` (the main pool by default): the model context, the session's agent
    spec, workspace and yolo switch."""
    request = {
        "spec": agent_pool.spec_for(session),
        "text": turn_text,
        "image_paths": image_paths,
        "history": history,
        "user_ts": user_ts,
        "workspace": scope.workspace,
        "yolo": scope.yolo,
    }
    runner = RemoteRunner(request, on_event, scope)
    POOL.get(pool).start(runner)
    return runner


def side_call(
    name: str, args: dict[str, Any], timeout: float = SIDE_CALL_S, *, pool: WorkerPool | None = None
) -> Any:
    """The agent's side call ``name`` (``api.agent.agent_calls``): in a worker process of ``pool`` (the caller's
    app's; the one in use when None), or here without workers."""
    if enabled():
        return POOL.get(pool).call(name, args, timeout)
    return agent_calls.run(name, args)

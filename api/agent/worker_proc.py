"""One agent worker process seen from the server: started, fed frames, read by one thread, stopped.

``WorkerProc.spawn`` starts ``python -m api.server.agent_worker`` with one end of a socket pair and sends it the
settings. A reader thread hands each frame to ``on_frame``; when the connection ends (the worker exited,
crashed or was killed) it calls ``on_exit`` once. ``last_seen`` is when the worker last said anything (a
heartbeat counts): the pool kills a worker silent past its deadline.
"""

from __future__ import annotations

import logging
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from api.agent import worker_frames
from api.store import config as _config

log = logging.getLogger("talaria.worker_proc")

STOP_WAIT_S = 8.0  # a worker asked to stop may finish its turns' interrupts this long before it is killed
STARTUP_S = 60.0  # what a starting worker (an interpreter importing Talaria) may take before it says "ready"


def serves(terminal: dict[str, Any] | None) -> str:
    """The worker's second argument, which only names where its tools run, so ``ps`` tells the workers of each
    environment apart: ``local``, or the backend and host (``ssh:deploy@build.lan:22``)."""
    if terminal is None:
        return "local"
    host = str(terminal.get("ssh_host") or "")
    if host and terminal.get("ssh_user"):
        host = f"{terminal['ssh_user']}@{host}"
    if host and terminal.get("ssh_port"):
        host = f"{host}:{terminal['ssh_port']}"
    return f"{terminal.get('backend') or 'local'}:{host}" if host else str(terminal.get("backend") or "local")


class WorkerProc:
    def __init__(
        self,
        proc: subprocess.Popen[bytes],
        channel: worker_frames.Channel,
        on_frame: Callable[[WorkerProc, dict[str, Any]], None],
        on_exit: Callable[[WorkerProc], None],
    ):
        self.proc = proc
        self.pid = proc.pid
        self.channel = channel
        self.last_seen = time.monotonic()
        self.ready = False  # said "ready": from then on, silence past the deadline means it hangs
        self.live: set[str] = set()  # ids of the turns it runs
        self.served = 0  # turns it finished
        self.idle_since = time.monotonic()
        self.retiring = False  # takes no new turn; stopped once its turns end
        self.exited = threading.Event()
        self._on_frame = on_frame
        self._on_exit = on_exit
        self._reader = threading.Thread(target=self._read, name=f"worker-{self.pid}", daemon=True)

    @classmethod
    def spawn(
        cls,
        on_frame: Callable[[WorkerProc, dict[str, Any]], None],
        on_exit: Callable[[WorkerProc], None],
        terminal: dict[str, Any] | None = None,
    ) -> WorkerProc:
        """``terminal``: the agent's ``terminal.*`` keys of the one execution environment this worker's tools
        run in (``api.services.environment_workers``); None keeps the agent's own configuration."""
        ours, theirs = socket.socketpair()
        try:
            proc = subprocess.Popen(
                [sys.executable, "-m", "api.server.agent_worker", str(theirs.fileno()), serves(terminal)],
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
                stdout=sys.stderr,  # the agent prints to stdout: its lines join the server's log, not a pipe
                close_fds=True,
            )
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        worker = cls(proc, worker_frames.Channel(ours), on_frame, on_exit)
        hello: dict[str, Any] = {"op": "hello", "settings": dict(_config.SETTINGS_VALUES)}
        if terminal is not None:
            hello["terminal"] = terminal
        worker.channel.send(hello)
        worker._reader.start()
        log.info("agent worker %d started", worker.pid)
        return worker

    def send(self, frame: dict[str, Any]) -> bool:
        return self.channel.send(frame)

    def _read(self) -> None:
        try:
            while True:
                try:
                    frame = self.channel.receive()
                except worker_frames.FrameError:
                    log.exception("agent worker %d sent a broken frame; killing it", self.pid)
                    self.kill()
                    frame = None
                if frame is None:
                    break
                self.last_seen = time.monotonic()
                self.ready = True
                try:
                    self._on_frame(self, frame)
                except Exception:  # noqa: BLE001 - one bad frame must not stop the worker's other turns
                    log.exception("handling a frame of agent worker %d failed", self.pid)
        finally:
            self.channel.close()
            try:
                self.proc.wait(STOP_WAIT_S)
            except subprocess.TimeoutExpired:
                self.kill()
            self.exited.set()
            self._on_exit(self)

    def silent_for(self, now: float, deadline: float) -> float | None:
        """How long it has said nothing, when that is past its deadline (a longer one while it starts)."""
        silent = now - self.last_seen
        allowed = deadline if self.ready else max(deadline, STARTUP_S)
        return silent if silent > allowed and not self.exited.is_set() else None

    def kill(self) -> None:
        try:
            self.proc.kill()
        except OSError:
            pass

    def stop(self) -> None:
        """Ask it to stop (its turns are interrupted); killed if it has not ended within ``STOP_WAIT_S``."""
        self.send({"op": "stop"})
        try:
            self.proc.wait(STOP_WAIT_S)
        except subprocess.TimeoutExpired:
            log.warning("agent worker %d did not stop; killing it", self.pid)
            self.kill()
            self.proc.wait()
        self.channel.close()
        self.exited.wait(STOP_WAIT_S)

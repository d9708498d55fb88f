"""Which process fires the agent's cron jobs, and Talaria's own scheduler process.

With the ``cron_scheduler`` setting on, the server starts a child (``python -m api.agent.cron_ticker``) that runs
the agent's own ``cron.scheduler.tick`` every ``cron_tick_seconds``. ``tick`` takes the agent's scheduler
lock (``$HERMES_HOME/cron/.tick.lock``), so while the agent's gateway ticks too each due job fires once,
from whichever process holds the lock. The child keeps agent turns off the server process (a job's turn
builds its own agent and ``state.db`` session) and ends with the server: on SIGTERM, or when its stdin,
a pipe only the server holds, closes (the server is gone). A byte on that pipe wakes it for a "run now";
a pipe rather than a signal, so a wake sent while the child still starts up waits instead of killing it.
It imports the agent's cron only once a job exists.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import subprocess
import sys
import threading
from types import FrameType
from typing import Any

from api.agent import agent_cron, agent_runtime
from api.store import config
from api.store.in_use import InUse

log = logging.getLogger(__name__)

STOP_GRACE_S = 5.0


class CronTicker:
    """The server's handle on its scheduler child."""

    def __init__(self) -> None:
        self._proc: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()

    def start(self) -> None:
        if not config.setting("cron_scheduler"):
            return
        interval = str(int(config.setting("cron_tick_seconds")))
        with self._lock:
            if self._proc is None:
                # The child inherits the environment, where api.store.config put HERMES_HOME for the agent.
                self._proc = subprocess.Popen(
                    [sys.executable, "-m", "api.agent.cron_ticker", "--interval", interval],
                    stdin=subprocess.PIPE,
                )

    def pid(self) -> int | None:
        with self._lock:
            proc = self._proc
        return proc.pid if proc is not None and proc.poll() is None else None

    def wake(self) -> None:
        """Tick now instead of at the end of the interval."""
        with self._lock:
            if self._proc is None or self._proc.stdin is None:
                return
            try:
                self._proc.stdin.write(b"w")
                self._proc.stdin.flush()
            except OSError:  # the child is gone; the status shows it
                log.warning("the cron scheduler is not running")

    def stop(self, grace_s: float = STOP_GRACE_S) -> None:
        with self._lock:
            proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.stdin is not None:
            proc.stdin.close()
        proc.terminate()
        try:
            proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            log.warning("the cron scheduler did not stop in %.0f s; killing it", grace_s)
            proc.kill()
            proc.wait()


TICKER: InUse[CronTicker] = InUse(CronTicker)  # the app's (``App.cron_ticker``), else built on first use


def status(ticker: CronTicker | None = None) -> dict[str, Any]:
    """Which process fires the jobs: Talaria's scheduler (``ticker``, the app's; the one in use when None), the
    agent's gateway, both (the lock picks), none."""
    talaria = TICKER.get(ticker).pid()
    gateway = agent_cron.gateway_pid()
    if talaria and gateway:
        fired_by = "both"
    else:
        fired_by = "talaria" if talaria else "gateway" if gateway else "none"
    return {
        "fired_by": fired_by,
        "talaria": {"enabled": bool(config.setting("cron_scheduler")), "pid": talaria},
        "gateway": {"pid": gateway},
        "tick_seconds": int(config.setting("cron_tick_seconds")),
    }


def overview(ticker: CronTicker | None = None) -> dict[str, Any]:
    """Every job with its latest run, and which process fires them."""
    return {**agent_cron.list_jobs(), "scheduler": status(ticker)}


def _woken(job: Any, ticker: CronTicker | None) -> dict[str, Any]:
    TICKER.get(ticker).wake()
    return dict(job)


def run_now(job_id: Any, ticker: CronTicker | None = None) -> dict[str, Any]:
    """Make the job due and wake Talaria's scheduler (``ticker``; the gateway's picks it up on its own tick)."""
    return _woken(agent_cron.run_job_now(job_id), ticker)


def create_job(fields: Any, ticker: CronTicker | None = None) -> dict[str, Any]:
    """A new job; Talaria's scheduler (``ticker``) wakes, so it starts watching the store at once."""
    return _woken(agent_cron.create_job(fields), ticker)


# ----------------------------------------------------------------------------------------------
# The child
# ----------------------------------------------------------------------------------------------


AGENT_MODULES = ("run_agent", "model_tools")  # what building a job's agent imports


def _tick() -> bool:
    try:
        agent_runtime.agent_module("cron.scheduler").tick(verbose=False, sync=False)
    except Exception:  # noqa: BLE001 - one failed tick must not end the scheduler
        log.exception("cron tick failed")
        return False
    return True


def _loop(interval: float, stop: threading.Event, wake: threading.Event) -> None:
    jobs_file = config.HERMES_HOME / "cron" / "jobs.json"
    started = False
    while not stop.is_set():
        if started or jobs_file.exists():
            jobs = agent_runtime.agent_module("cron.jobs")
            if not started:
                # The agent runs due jobs in threads of its own; their first agents would import the agent and
                # discover its tools (parsing each tool's source) at the same time, which CPython 3.11 can fail
                # ("AST constructor recursion depth mismatch"). Imported here first, once, in one thread.
                for name in AGENT_MODULES:
                    agent_runtime.agent_module(name)
                # Runs a previous scheduler left unfinished are marked unknown, as the agent's ticker does.
                agent_runtime.agent_module("cron.executions").recover_interrupted_executions()
                started = True
            jobs.record_ticker_heartbeat(success=_tick())
        wake.wait(interval)
        wake.clear()
    if started:
        # The agent's own record of runs cut short, so they show as interrupted rather than running.
        agent_runtime.agent_module("cron.scheduler").mark_running_jobs_interrupted("Talaria stopped")


def _read_wakes(stop: threading.Event, wake: threading.Event) -> None:
    while os.read(sys.stdin.fileno(), 64):
        wake.set()
    stop.set()  # end of file: the server closed the pipe, or is gone
    wake.set()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m api.agent.cron_ticker")
    parser.add_argument("--interval", type=float, default=60.0)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="cron-ticker: %(levelname)s %(message)s")
    config.configure_from_environment()
    stop, wake = threading.Event(), threading.Event()

    def on_stop(_signum: int, _frame: FrameType | None) -> None:
        stop.set()
        wake.set()

    signal.signal(signal.SIGTERM, on_stop)
    signal.signal(signal.SIGINT, on_stop)
    threading.Thread(target=_read_wakes, args=(stop, wake), name="wakes", daemon=True).start()
    _loop(max(1.0, args.interval), stop, wake)
    sys.stdout.flush()
    # A job's turn may still run in the agent's worker threads; the process ends without waiting for them.
    os._exit(0)


if __name__ == "__main__":
    raise SystemExit(main())

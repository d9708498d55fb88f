"""Which process fires the agent's cron jobs, and Talaria's own scheduler process.

With the ``cron_scheduler`` setting on, the server starts a child (``python -m api.cron_ticker``) that runs
the agent's own ``cron.scheduler.tick`` every ``cron_tick_seconds``. ``tick`` takes the agent's scheduler
lock (``$HERMES_HOME/cron/.tick.lock``), so while the agent's gateway ticks too each due job fires once,
from whichever process holds the lock. The child keeps agent turns off the server process (a job's turn
builds its own agent and ``state.db`` session) and ends with the server: on SIGTERM, or when its parent
is gone. It imports the agent's cron only once a job exists. SIGUSR1 wakes it for a "run now".
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import subprocess
import sys
import threading
from typing import Any

from api import agent_cron, agent_runtime, config

log = logging.getLogger(__name__)

STOP_GRACE_S = 5.0
# The child notices a vanished parent within this, whatever the tick interval.
_PARENT_CHECK_S = 1.0


class CronTicker:
    """The server's handle on its scheduler child."""

    def __init__(self) -> None:
        self._proc: subprocess.Popen | None = None
        self._lock = threading.Lock()

    def start(self) -> None:
        if not config.setting("cron_scheduler"):
            return
        interval = str(int(config.setting("cron_tick_seconds")))
        with self._lock:
            if self._proc is None:
                # The child inherits the environment, where api.config put HERMES_HOME for the agent.
                self._proc = subprocess.Popen(
                    [sys.executable, "-m", "api.cron_ticker", "--interval", interval],
                    stdin=subprocess.DEVNULL,
                )

    def pid(self) -> int | None:
        with self._lock:
            proc = self._proc
        return proc.pid if proc is not None and proc.poll() is None else None

    def wake(self) -> None:
        """Tick now instead of at the end of the interval."""
        with self._lock:
            if self._proc is not None and self._proc.poll() is None:
                self._proc.send_signal(signal.SIGUSR1)

    def stop(self, grace_s: float = STOP_GRACE_S) -> None:
        with self._lock:
            proc, self._proc = self._proc, None
        if proc is None:
            return
        proc.terminate()
        try:
            proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            log.warning("the cron scheduler did not stop in %.0f s; killing it", grace_s)
            proc.kill()
            proc.wait()


TICKER = CronTicker()


def status() -> dict[str, Any]:
    """Which process fires the jobs: Talaria's scheduler, the agent's gateway, both (the lock picks), none."""
    talaria = TICKER.pid()
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


def overview() -> dict[str, Any]:
    """Every job with its latest run, and which process fires them."""
    return {**agent_cron.list_jobs(), "scheduler": status()}


def _woken(job: Any) -> dict[str, Any]:
    TICKER.wake()
    return dict(job)


def run_now(job_id: Any) -> dict[str, Any]:
    """Make the job due and wake Talaria's scheduler (the gateway's picks it up on its own tick)."""
    return _woken(agent_cron.run_job_now(job_id))


def create_job(fields: Any) -> dict[str, Any]:
    """A new job; Talaria's scheduler wakes, so it starts watching the store at once."""
    return _woken(agent_cron.create_job(fields))


# ----------------------------------------------------------------------------------------------
# The child
# ----------------------------------------------------------------------------------------------


def _tick() -> bool:
    try:
        agent_runtime.agent_module("cron.scheduler").tick(verbose=False, sync=False)
    except Exception:  # noqa: BLE001 - one failed tick must not end the scheduler
        log.exception("cron tick failed")
        return False
    return True


def _loop(interval: float, stop: threading.Event, wake: threading.Event) -> None:
    parent = os.getppid()
    jobs_file = config.HERMES_HOME / "cron" / "jobs.json"
    started = False
    while not stop.is_set() and os.getppid() == parent:
        if started or jobs_file.exists():
            jobs = agent_runtime.agent_module("cron.jobs")
            if not started:
                # Runs a previous scheduler left unfinished are marked unknown, as the agent's ticker does.
                agent_runtime.agent_module("cron.executions").recover_interrupted_executions()
                started = True
            jobs.record_ticker_heartbeat(success=_tick())
        waited = 0.0
        while waited < interval and not stop.is_set() and os.getppid() == parent:
            if wake.wait(min(_PARENT_CHECK_S, interval - waited)):
                break
            waited += _PARENT_CHECK_S
        wake.clear()
    if started:
        # The agent's own record of runs cut short, so they show as interrupted rather than running.
        agent_runtime.agent_module("cron.scheduler").mark_running_jobs_interrupted("Talaria stopped")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m api.cron_ticker")
    parser.add_argument("--interval", type=float, default=60.0)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="cron-ticker: %(levelname)s %(message)s")
    config.configure_from_environment()
    stop, wake = threading.Event(), threading.Event()

    def on_stop(_signum, _frame) -> None:
        stop.set()
        wake.set()

    signal.signal(signal.SIGTERM, on_stop)
    signal.signal(signal.SIGINT, on_stop)
    signal.signal(signal.SIGUSR1, lambda _signum, _frame: wake.set())
    _loop(max(1.0, args.interval), stop, wake)
    sys.stdout.flush()
    # A job's turn may still run in the agent's worker threads; the process ends without waiting for them.
    os._exit(0)


if __name__ == "__main__":
    raise SystemExit(main())

"""A pool of agent worker processes per execution environment: where a non-local session's turns run.

The agent picks its terminal backend once per process and shares the sandbox it builds among every turn
of that process, so a turn of a session whose environment is not ``local`` runs in a worker process
started for that environment alone (``api.server.agent_worker.use_environment``), whatever ``agent_workers``
says. Each environment gets its own ``WorkerPool``, started on its first turn; its workers retire when idle
(the pool's own rule), and the pool is stopped when the environment's definition changes or is deleted,
so a host named anew is never reached through a process set up for the old one.
"""

from __future__ import annotations

import json
import threading
from typing import Any

from api.agent import worker_pool
from api.store.in_use import InUse


def _size() -> int:
    """One process per environment: a worker runs many turns at once, and one process keeps one connection
    (the agent's SSH master, a container) per target."""
    return 1


def _stop_in_background(pool: worker_pool.WorkerPool) -> None:
    threading.Thread(target=pool.stop, name="environment-pool-stop", daemon=True).start()


class EnvironmentPools:
    """The pools of one app's environments (name → its definition as text, its pool), none once stopped. The app
    owns one (``App.environment_pools``), put in use."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pools: dict[str, tuple[str, worker_pool.WorkerPool]] = {}
        self._stopped = False

    def pool_for(self, name: str, definition: dict[str, Any]) -> worker_pool.WorkerPool:
        fingerprint = json.dumps(definition, sort_keys=True)
        with self._lock:
            if self._stopped:
                raise RuntimeError("the agent workers are stopping")
            found = self._pools.get(name)
            if found is not None and found[0] == fingerprint:
                return found[1]
            pool = worker_pool.WorkerPool(terminal=dict(definition), size=_size)
            self._pools[name] = (fingerprint, pool)
        if found is not None:
            _stop_in_background(found[1])
        return pool

    def forget(self, name: str) -> None:
        with self._lock:
            found = self._pools.pop(name, None)
        if found is not None:
            _stop_in_background(found[1])

    def pids(self) -> dict[str, list[int]]:
        with self._lock:
            pools = {name: pool for name, (_, pool) in self._pools.items()}
        return {name: pool.pids() for name, pool in pools.items()}

    def stop_all(self) -> None:
        with self._lock:
            self._stopped = True
            pools = [pool for _, pool in self._pools.values()]
            self._pools.clear()
        threads = [threading.Thread(target=pool.stop, daemon=True) for pool in pools]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()


POOLS: InUse[EnvironmentPools] = InUse(
    EnvironmentPools
)  # the app's (``App.environment_pools``), else built on first use


def pool_for(
    name: str, definition: dict[str, Any], *, pools: EnvironmentPools | None = None
) -> worker_pool.WorkerPool:
    """The pool of ``name`` as it is defined now; a pool made for an older definition is stopped."""
    return POOLS.get(pools).pool_for(name, definition)


def forget(name: str, pools: EnvironmentPools | None = None) -> None:
    """``name`` was changed or deleted: its workers among ``pools`` (the app's; those in use when None) stop
    (their running turns are interrupted)."""
    POOLS.get(pools).forget(name)


def pids() -> dict[str, list[int]]:
    """The worker processes of each environment's pool."""
    return POOLS.get().pids()


def stop_all() -> None:
    """The server stops: every environment's workers stop (those that do not end in time are killed)."""
    POOLS.get().stop_all()

"""A gateway-style second process over one ``$HERMES_HOME``: it holds the agent's cron scheduler lock
(``cron/.tick.lock``, as the gateway's ticker does during a tick) until told to tick, then runs the agent's
own ``cron.scheduler.tick`` once and reports how many jobs it fired.

    with CronGateway(hermes_home) as gateway:   # the lock is held once this returns
        ...
        fired = gateway.tick()                  # releases the lock and ticks, as the gateway would
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


class CronGateway:
    def __init__(self, hermes_home: str | os.PathLike) -> None:
        self.hermes_home = Path(hermes_home)
        self._proc: subprocess.Popen | None = None

    @property
    def pid(self) -> int:
        assert self._proc is not None
        return self._proc.pid

    def __enter__(self) -> CronGateway:
        env = {**os.environ, "HERMES_HOME": str(self.hermes_home)}
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "talaria_testing.cron_gateway"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        assert self._read() == {"locked": True}
        return self

    def _read(self) -> dict:
        assert self._proc is not None and self._proc.stdout is not None
        line = self._proc.stdout.readline()
        if not line:
            raise RuntimeError("the gateway-style process ended")
        return json.loads(line)

    def tick(self) -> int:
        assert self._proc is not None and self._proc.stdin is not None
        self._proc.stdin.write("tick\n")
        self._proc.stdin.flush()
        return int(self._read()["fired"])

    def __exit__(self, *exc) -> None:
        if self._proc is not None:
            self._proc.kill()
            self._proc.wait()
            for stream in (self._proc.stdin, self._proc.stdout):
                if stream is not None:
                    stream.close()
            self._proc = None


def main() -> int:
    import fcntl

    lock_path = Path(os.environ["HERMES_HOME"]) / "cron" / ".tick.lock"
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    held = open(lock_path, "w", encoding="utf-8")  # noqa: SIM115 - held until told to tick
    fcntl.flock(held, fcntl.LOCK_EX)
    print(json.dumps({"locked": True}), flush=True)
    for line in sys.stdin:
        if line.strip() == "tick":
            from cron.scheduler import tick

            held.close()  # the lock is the tick's own from here on
            print(json.dumps({"fired": tick(verbose=False, sync=True)}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

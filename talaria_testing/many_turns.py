"""Many short turns through the real server's HTTP API, for the memory test and bench.

``memory_server`` is the real server (``heap_probe.HeapProbedServer``) with its agent in worker processes
pointed at the fake LLM; ``answer`` is the fake LLM's policy (every fourth turn calls the agent's todo tool
first). ``Lanes`` sends turns from a few clients at once through ``/api/chat/start`` and reads each to its end
through ``/api/chat/stream``; each lane moves to a fresh session every ``turns_per_session`` turns, so what a
session holds does not grow with the run. ``WorkerWatch`` samples the largest RSS each worker process reached.
"""

from __future__ import annotations

import subprocess
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from talaria_testing.chat_client import chat, named, new_session, text_of
from talaria_testing.fake_llm import Reply, write_hermes_config
from talaria_testing.fake_llm_server import last_user_text
from talaria_testing.heap_probe import HeapProbedServer
from talaria_testing.server_proc import ServerProc

TODO_ARGS = {"todos": [{"id": "1", "content": "keep memory flat", "status": "pending"}]}
TOOL_SUFFIX = " with a tool"


def answer(body: dict[str, Any]) -> Reply:
    """The fake LLM's policy: a tool call first when the message asks for one, then the answer naming it."""
    asked = last_user_text(body) or ""
    if body["messages"][-1]["role"] == "user" and asked.endswith(TOOL_SUFFIX):
        call = {"id": f"call_{abs(hash(asked))}", "name": "todo", "arguments": TODO_ARGS}
        return Reply(text="Planning.", tool_calls=[call])
    return Reply(text=f"Answer to {asked}: a few words back.")


def one_certificate(folder: Path) -> Path:
    """A CA file of one throwaway certificate. The agent builds a TLS context from the CA file the environment
    names for each model call, though the fake LLM speaks plain HTTP; parsing the system's whole bundle each
    time is most of a short turn's CPU, which these runs spend on turns instead."""
    cert, key = folder / "ca.pem", folder / "ca.key"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        + ["-subj", "/CN=talaria-test", "-days", "1", "-keyout", str(key), "-out", str(cert)],
        check=True,
        capture_output=True,
    )
    return cert


def memory_server(root: Path, base_url: str, *, lanes: int, worker_max_turns: int) -> HeapProbedServer:
    """The real server, not started yet: two agent workers recycled after ``worker_max_turns`` turns, the
    todo tool, a session cache as large as two sessions a lane (the same sessions cached at each measure)."""
    ca_file = str(one_certificate(root))
    env = {
        **{name: ca_file for name in ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE")},
        "HERMES_WEBUI_SESSIONS_MAX": str(2 * lanes),
        "TALARIA_AGENT_TOOLSETS": "todo",
        "TALARIA_AGENT_WORKERS": "2",
        "TALARIA_WORKER_MAX_TURNS": str(worker_max_turns),
    }
    srv = HeapProbedServer(root, env=env)
    write_hermes_config(srv.hermes_home, base_url)
    return srv


class Lanes:
    """``lanes`` clients sending turns at once, each in its own session, a new one every ``turns_per_session``."""

    def __init__(self, srv: ServerProc, lanes: int, turns_per_session: int) -> None:
        self.srv = srv
        self.turns_per_session = turns_per_session
        self.sent = 0
        self._lock = threading.Lock()
        self._lanes: list[tuple[str, int]] = [(new_session(srv), 0) for _ in range(lanes)]

    def run(self, count: int) -> None:
        """``count`` turns (rounded down to a multiple of the lanes), each answered whole without an error."""
        with ThreadPoolExecutor(len(self._lanes)) as pool:
            done = [
                pool.submit(self._lane, lane, count // len(self._lanes)) for lane in range(len(self._lanes))
            ]
        for future in done:
            future.result()

    def _lane(self, lane: int, count: int) -> None:
        for _ in range(count):
            sid, turns = self._lanes[lane]
            if turns == self.turns_per_session:
                sid, turns = new_session(self.srv), 0
            with self._lock:
                self.sent += 1
                number = self.sent
            message = f"turn {number}" + (TOOL_SUFFIX if number % 4 == 0 else "")
            events = chat(self.srv, sid, message)
            assert not named(events, "error"), named(events, "error")
            assert text_of(events).endswith(f"Answer to {message}: a few words back.")
            self._lanes[lane] = (sid, turns + 1)


def _children(pid: int) -> list[int]:
    """The processes whose parent is ``pid``, from each process's own ``stat`` (a thread's ``children``
    file drops the children of threads that ended, and a server's request and turn threads end all the time)."""
    found: list[int] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # gone meanwhile
        # "pid (comm) state ppid ...": the command may hold spaces and parentheses, so split after its last ")".
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            found.append(int(entry.name))
    return found


def worker_pids(srv: ServerProc, serving: str = "") -> list[int]:
    """The server's agent worker processes (its children running ``api.server.agent_worker``); with
    ``serving``, only those whose tools run there (``ssh:``, ``local``: the worker's second argument)."""
    assert srv.proc is not None
    pids = []
    for pid in _children(srv.proc.pid):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"api.server.agent_worker" in cmdline and (
            not serving or cmdline[-2].startswith(serving.encode())
        ):
            pids.append(pid)
    return pids


def rss_kb(pid: int) -> int:
    """The process's resident memory (``VmRSS``), 0 when it is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    return next((int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:")), 0)


class WorkerWatch:
    """The server's worker processes and the largest RSS each reached, sampled every ``interval`` seconds."""

    def __init__(self, srv: ServerProc, interval: float = 0.2) -> None:
        self.srv = srv
        self.interval = interval
        self.peak_kb: dict[int, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, name="worker-watch", daemon=True)

    def __enter__(self) -> WorkerWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _sample(self) -> None:
        while not self._stop.wait(self.interval):
            for pid in worker_pids(self.srv):
                self.peak_kb[pid] = max(rss_kb(pid), self.peak_kb.get(pid, 0))

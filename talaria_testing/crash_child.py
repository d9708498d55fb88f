"""Child processes for crash tests: they write through the public names until they are killed.

Each takes a ``multiprocessing`` connection as its last argument and reports on it; the parent
SIGKILLs the child at the moment it chose. Start them from a forkserver context (see
:func:`talaria_testing.killing.fork_context`), so no test-process thread or lock is inherited.
"""

from __future__ import annotations

import random
import signal
import time
from pathlib import Path

AFTER_DONE = -1  # ``stop_at`` value: report "done" after the operation returned, then wait to be killed
NEVER = 0  # ``stop_at`` value: run to completion and exit


def _block() -> None:
    while True:
        signal.pause()


def grow_session_forever(session_dir: str, sid: str, conn) -> None:
    """Append one message per save, forever; after each save returns, send the message count."""
    import api.store.models as models
    from api.store import session_store as store

    store.use(store.Store(Path(session_dir), models.Session))
    session = models.Session.load(sid) or models.Session(session_id=sid, title="crash", messages=[])
    n = len(session.messages)
    while True:
        session.messages.append(
            {
                "role": "user" if n % 2 == 0 else "assistant",
                "content": f"message {n} " + "x" * (n % 97),
                "timestamp": 1000.0 + n,
            }
        )
        n += 1
        session.save()
        conn.send(n)


class PausingHook:
    """A ``STEP_HOOK`` that reports every durable step on ``conn`` and pauses at step ``stop_at``."""

    def __init__(self, conn, stop_at: int):
        self.conn, self.stop_at, self.count = conn, stop_at, 0

    def __call__(self, step: str, path: Path) -> None:
        self.count += 1
        self.conn.send(("step", self.count, step, Path(path).name))
        if self.count == self.stop_at:
            self.conn.send(("paused", self.count))
            _block()

    def done(self) -> None:
        """Report the operation's end; with ``AFTER_DONE`` wait there to be killed."""
        self.conn.send(("done", self.count))
        if self.stop_at == AFTER_DONE:
            _block()


def step_child(name: str, root: str, info: dict, stop_at: int, conn) -> None:
    """Run scenario ``name`` against ``root``; report every durable step and pause at step ``stop_at``."""
    from api.store import atomic
    from talaria_testing.scenarios import BY_NAME, bound

    scenario = BY_NAME[name]
    with bound(Path(root), restore=False) as sessions:
        hook = PausingHook(conn, stop_at)
        atomic.STEP_HOOK = hook
        try:
            scenario.run(sessions, info)
        except BaseException as exc:
            conn.send(("error", f"{type(exc).__name__}: {exc}"))
            raise
        atomic.STEP_HOOK = None
        hook.done()


# ---------------------------------------------------------------------- random operations, killed at random moments

RANDOM_OPS = (
    ("turn", 30),
    ("streamed_turn", 15),
    ("undo", 8),
    ("retry", 5),
    ("truncate", 5),
    ("clear", 2),
    ("compress", 10),
    ("uncompress", 5),
    ("rename", 8),
)
DELIBERATE_OPS = frozenset({"undo", "retry", "truncate", "clear"})


def _last_user(messages: list) -> int | None:
    for i in range(len(messages) - 1, -1, -1):
        if isinstance(messages[i], dict) and messages[i].get("role") == "user":
            return i
    return None


def _next_ts(messages: list) -> float:
    from talaria_testing.scenarios import BASE_TS

    stamps = [
        m.get("timestamp")
        for m in messages
        if isinstance(m, dict) and isinstance(m.get("timestamp"), (int, float))
    ]
    return max([BASE_TS, *stamps]) + 1.0


def _plan(op: str, messages: list, rng: random.Random, serial: int) -> tuple[list[list], dict]:
    """The transcript after each save the operation makes (in order), and the operation's arguments."""
    ts = _next_ts(messages)
    if op == "turn":
        rows = [
            {"role": "user", "content": f"q{serial}", "timestamp": ts},
            {
                "role": "assistant",
                "content": f"a{serial} " + "x" * rng.randint(0, 400),
                "timestamp": ts + 0.5,
            },
        ]
        return [messages + rows], {"rows": rows}
    if op == "streamed_turn":
        user = {"role": "user", "content": f"sq{serial}", "timestamp": ts}
        partial = {
            "role": "assistant",
            "content": f"sa{serial} partial",
            "timestamp": ts + 0.5,
            "_partial": True,
        }
        final = {
            "role": "assistant",
            "content": f"sa{serial} " + "y" * rng.randint(0, 400),
            "timestamp": ts + 0.6,
        }
        return [messages + [user, partial], messages + [user, final]], {
            "user": user,
            "partial": partial,
            "final": final,
        }
    if op in ("undo", "retry"):
        idx = _last_user(messages)
        return [messages if idx is None else messages[:idx]], {}
    if op == "truncate":
        keep = rng.randint(0, len(messages))
        return [messages[:keep]], {"keep": keep}
    if op == "clear":
        return [[]], {}
    if op == "rename":
        return [messages], {"title": f"title {serial}"}
    return [messages], {}  # compress, uncompress: the transcript never changes


def _perform(op: str, sid: str, args: dict) -> None:
    from api.services import compression, session_catalogue, session_ops
    from api.store import session_edit

    if op == "turn":
        with session_edit.edit(sid) as s:
            s.messages.extend(args["rows"])
    elif op == "streamed_turn":
        with session_edit.edit(sid) as s:
            s.messages.extend([args["user"], args["partial"]])
            s.active_stream_id = "s" + args["user"]["content"]
            s.pending_user_message = args["user"]["content"]
            s.pending_started_at = args["user"]["timestamp"]
        with session_edit.edit(sid) as s:
            s.messages[-1] = args["final"]
            s.active_stream_id = s.pending_user_message = s.pending_started_at = None
    elif op == "undo":
        session_ops.undo_last(sid)
    elif op == "retry":
        session_ops.retry_last(sid)
    elif op == "truncate":
        session_ops.truncate_session(sid, args["keep"])
    elif op == "clear":
        session_ops.clear_session(sid)
    elif op == "compress":
        compression.manual_compress(sid)
    elif op == "uncompress":
        compression.uncompress(sid)
    elif op == "rename":
        session_catalogue.rename_session(sid, args["title"])


def random_ops_child(root: str, seed: int, conn) -> None:
    """Run seeded random operations on one session forever.

    Before each operation it sends ``("intent", k, op, [digest after each save], deliberate)``, after it
    ``("ack", k, digest, refused)``; ``refused`` names the error when the store declined (nothing to undo,
    too short to compress, a turn still marked streaming).
    """
    from api.rules.errors import ApiError
    from api.store import models
    from talaria_testing.promises import _digest
    from talaria_testing.scenarios import SID, bound

    rng = random.Random(seed)
    names = [op for op, _ in RANDOM_OPS]
    weights = [w for _, w in RANDOM_OPS]
    with bound(Path(root), restore=False):
        current = models.get_session(SID).messages
        conn.send(("ready", _digest(current)))
        k = 0
        while True:
            op = rng.choices(names, weights)[0]
            before = list(models.get_session(SID).messages)
            states, args = _plan(op, before, rng, seed * 100_000 + k)
            conn.send(("intent", k, op, [_digest(s) for s in states], op in DELIBERATE_OPS))
            refused = None
            try:
                _perform(op, SID, args)
            except (ApiError, ValueError) as exc:
                refused = f"{type(exc).__name__}: {exc}"
            except BaseException as exc:
                conn.send(("error", f"{op}: {type(exc).__name__}: {exc}"))
                raise
            conn.send(("ack", k, _digest(models.get_session(SID).messages), refused))
            k += 1
            time.sleep(0)


# ---------------------------------------------------------------------- a chat turn (api.services.streaming, scripted agent)


def chat_turn_child(root: str, stop_at: int, conn) -> None:
    """Run one chat turn on ``SID`` through ``api.services.streaming`` with the scripted agent; pause at step ``stop_at``.

    Reports ``("step", k, name, file)``, ``("started", stream_id)`` once ``start_turn`` returned and
    ``("done", k)`` once the turn finished (its final merge saved).
    """
    import threading

    import pytest

    from api.agent import turn_journal
    from api.services import streaming
    from api.store import atomic
    from talaria_testing import scripted_turns
    from talaria_testing.scenarios import SID, bound

    send_lock = threading.Lock()

    def send(msg) -> None:
        with send_lock:
            conn.send(msg)

    with bound(Path(root), restore=False):
        scripted_turns.install(pytest.MonkeyPatch())
        count = 0
        count_lock = threading.Lock()

        def hook(step: str, path: Path) -> None:
            nonlocal count
            with count_lock:
                count += 1
                mine = count
            send(("step", mine, step, Path(path).name))
            if mine == stop_at:
                send(("paused", mine))
                _block()

        atomic.STEP_HOOK = hook
        started = streaming.start_turn(SID, scripted_turns.USER_TEXT)
        send(("started", started["stream_id"]))
        turn = turn_journal.get_turn(started["stream_id"])
        with turn.cond:
            while not turn.finished:
                turn.cond.wait(1.0)
        send(("done", count))
        if stop_at == AFTER_DONE:
            _block()


# ---------------------------------------------------------------------- killed in the middle of one write


def killed_mid_write_child(root: str, workspace: str, what: str, conn) -> None:
    """Under ``<root>/sessions``, save session ``killed`` (``what="save"``) or upload a 2 MB attachment into
    ``workspace`` (``what="upload"``); once the write's temp file is written, report its name and wait to
    be killed."""
    import base64

    from api.services import attachments
    from api.store import atomic, models
    from talaria_testing.scenarios import bound

    big = "x" * (2 * 1024 * 1024)
    with bound(Path(root), restore=False):
        session = models.Session(session_id="killed", title="killed", workspace=workspace, messages=[])
        session.save()

        def hook(step: str, path: Path) -> None:
            if step == "tmp_written":
                conn.send(("paused", Path(path).name))
                _block()

        atomic.STEP_HOOK = hook
        if what == "save":
            session.messages.append({"role": "user", "content": big, "timestamp": 1000.0})
            session.save()
        else:
            attachments.store_attachment("killed", "report.txt", base64.b64encode(big.encode()).decode())

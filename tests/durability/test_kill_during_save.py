"""A real process saving a growing session is SIGKILLed at random moments; nothing acknowledged is lost."""

from __future__ import annotations

import base64
import random
import time

from api.services.session_recovery import recover_all_sessions_on_startup
from api.store.models import Session
from talaria_testing.crash_child import grow_session_forever, killed_mid_write_child
from talaria_testing.killing import run_child
from talaria_testing.server_proc import ServerProc


def _expected(n):
    return {
        "role": "user" if n % 2 == 0 else "assistant",
        "content": f"message {n} " + "x" * (n % 97),
        "timestamp": 1000.0 + n,
    }


def _run_and_kill(session_dir, sid, rng) -> int:
    """Let the child acknowledge 1-4 saves, kill it a moment later; the last acknowledged count."""
    wanted = rng.randint(1, 4)
    seen = []

    def enough(msg) -> bool:
        seen.append(msg)
        return len(seen) >= wanted

    msgs, _ = run_child(
        grow_session_forever, (str(session_dir), sid), until=enough, delay=rng.random() * 0.004, timeout=20
    )
    return max([m for m in msgs if isinstance(m, int)], default=0)


def test_sigkill_mid_save_never_tears_the_file_or_loses_acknowledged_messages(
    state_dir, counters, durability
):
    kills = 300 if durability.full else 200
    rng = random.Random(1234)
    sid = "crashgrow"
    acked_max = 0
    violations = []
    started = time.monotonic()
    for kill in range(kills):
        acked = _run_and_kill(state_dir, sid, rng)
        acked_max = max(acked_max, acked)
        loaded = Session.load(sid)  # a torn file would raise here
        count = len(loaded.messages) if loaded else 0
        if count < acked_max:
            violations.append((kill, "lost acknowledged messages", count, acked_max))
        if loaded and loaded.messages != [_expected(i) for i in range(count)]:
            violations.append((kill, "content differs", count))
        acked_max = max(acked_max, count)
    counters.add("kill_matrix", "kill_points", kills)
    counters.add("kill_matrix", "kill_points.grow_forever", kills)
    for v in violations:
        counters.violation("kill_matrix", f"grow_forever kill {v[0]}", str(v[1:]))
    counters.set("kill_matrix", "grow_forever_seconds", round(time.monotonic() - started, 1))
    assert not violations, violations[:5]
    summary = recover_all_sessions_on_startup(state_dir)
    assert summary["restored"] == 0
    assert len(Session.load(sid).messages) >= acked_max
    leftovers = [p.name for p in state_dir.iterdir() if ".tmp." in p.name]
    # a kill between create and replace may leave a temp file, never a torn session
    assert len(leftovers) <= kills


def _temps(folder) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if ".tmp." in p.name)


def test_temp_files_of_a_save_and_an_upload_killed_midway_are_swept(tmp_path):
    """A kill mid-save or mid-upload left its temp file for good (2 MB ``*.tmp.*`` files piled up in
    ``uploads/`` and ``sessions/``). Real processes are SIGKILLed with a save's and an upload's temp file
    written; the server's start removes the session folder's, naming each in its log, and the first
    upload into the workspace removes the uploads folder's."""
    srv = ServerProc(tmp_path)
    for folder in (srv.state_dir, srv.workspace, srv.hermes_home):
        folder.mkdir(parents=True)
    for what in ("save", "upload"):
        _, reached = run_child(
            killed_mid_write_child,
            (str(srv.state_dir), str(srv.workspace), what),
            until=lambda msg: msg[0] == "paused",
            timeout=30,
        )
        assert reached
    uploads = srv.workspace / "uploads"
    left_in_sessions, left_in_uploads = _temps(srv.session_dir), _temps(uploads)
    assert left_in_sessions and left_in_uploads
    with srv:
        assert _temps(srv.session_dir) == []
        assert all(name in srv.log_text() for name in left_in_sessions)
        assert _temps(uploads) == left_in_uploads  # untouched until the folder is used
        body = {"session_id": "killed", "name": "next.txt", "data": base64.b64encode(b"next").decode()}
        assert srv.json("POST", "/api/session/attach", body)[0] == 200
        assert _temps(uploads) == []

"""A real server is SIGKILLed in the middle of a bulk action of the sidebar (``POST /api/sessions/bulk``),
at a durable step of the third session's save (``api.store.atomic.STEP_HOOK``, set in the server process by
``talaria_testing.paused_server``). Each session is then whole: the ones before it changed, it either old or
new, the ones after it untouched; after a restart every one opens with all its messages."""

from __future__ import annotations

import json
import threading

import pytest

from talaria_testing.paused_server import PausedServer
from talaria_testing.server_proc import ServerProc
from talaria_testing.transcripts import conversation

pytestmark = pytest.mark.integration


def _make_sessions(srv: ServerProc, count: int) -> tuple[list[str], str]:
    sids = []
    for i in range(count):
        body = {"title": f"Bulk {i}", "messages": conversation(f"question {i}", start=1000.0 + i)}
        sids.append(srv.post_json("/api/session/import", body)["session"]["session_id"])
    project = srv.post_json("/api/projects/create", {"name": "Target"})["project"]["project_id"]
    return sids, project


def _send(srv: ServerProc, body: dict) -> threading.Thread:
    def send() -> None:
        try:
            srv.request("POST", "/api/sessions/bulk", body, timeout=30)
        except OSError:
            pass  # the server is killed before it answers

    thread = threading.Thread(target=send, daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize("step", ["tmp_written", "tmp_fsynced", "replaced"])
def test_a_bulk_move_killed_mid_way_leaves_each_session_whole(tmp_path, step):
    with ServerProc(tmp_path) as srv:
        sids, project = _make_sessions(srv, 5)
        before = {sid: (srv.session_dir / f"{sid}.json").read_bytes() for sid in sids}
    paused = PausedServer(tmp_path, step=step, name=f"{sids[2]}.json")
    paused.start()
    try:
        sender = _send(paused, {"action": "move", "session_ids": sids, "project_id": project})
        assert paused.wait_paused().startswith(f"{sids[2]}.json")
    finally:
        paused.kill()
    sender.join(30)
    files = {sid: json.loads((paused.session_dir / f"{sid}.json").read_bytes()) for sid in sids}
    assert [files[sid]["project_id"] for sid in sids[:2]] == [project, project]
    assert files[sids[2]]["project_id"] == (project if step == "replaced" else None)
    assert [(paused.session_dir / f"{sid}.json").read_bytes() for sid in sids[3:]] == [
        before[s] for s in sids[3:]
    ]
    with ServerProc(tmp_path) as srv:
        for sid in sids:
            opened = srv.get_json(f"/api/session?session_id={sid}")["session"]
            assert [m["content"] for m in opened["messages"]] == [
                m["content"] for m in files[sid]["messages"]
            ]
        view = srv.get_json(f"/api/sessions?project_id={project}")
        assert {row["session_id"] for row in view["sessions"]} == {
            sid for sid in sids if files[sid]["project_id"] == project
        }

"""The cron panel's routes over the agent's own cron store, with Talaria's scheduler child running the
agent's own tick: a job fires once at its time, never from Talaria while a gateway-style process holds the
agent's scheduler lock (and once from that process), run now, pause/resume/delete, bad input. The real
server and agent on a temporary HERMES_HOME; the fake LLM answers the job's turn."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest

from talaria_testing.cron_gateway import CronGateway
from talaria_testing.fake_llm import Reply, agent_server

pytestmark = pytest.mark.integration


@pytest.fixture
def srv(llm, tmp_path):
    server = agent_server(
        tmp_path, llm.base_url, env={"TALARIA_CRON_SCHEDULER": "1", "TALARIA_CRON_TICK_SECONDS": "1"}
    )
    with server:
        yield server


def _soon(seconds: float) -> str:
    return (datetime.now(UTC) + timedelta(seconds=seconds)).isoformat(timespec="seconds")


def _create(srv, schedule: str, prompt: str = "Say the word.") -> dict:
    return srv.post_json("/api/cron/create", {"prompt": prompt, "schedule": schedule, "name": "word"})["job"]


def _finished_runs(srv, job_id: str, count: int = 1, timeout: float = 60.0) -> list[dict]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        runs = srv.get_json(f"/api/cron/runs?job_id={job_id}")["runs"]
        done = [run for run in runs if run["finished_at"]]
        if len(done) >= count:
            return runs
        time.sleep(0.3)
    raise AssertionError(
        f"{count} finished run(s) of {job_id} not seen in {timeout} s: {runs}\n{srv.log_text()}"
    )


def test_a_job_created_through_the_page_fires_once_at_its_time_with_its_output_and_session(srv, llm):
    llm.script(Reply(text="The word is cormorant."))
    job = _create(srv, _soon(3))
    assert srv.get_json("/api/cron/jobs")["jobs"][0]["id"] == job["id"]

    runs = _finished_runs(srv, job["id"])
    time.sleep(3)  # several more ticks: a one-shot that fired stays fired
    runs = srv.get_json(f"/api/cron/runs?job_id={job['id']}")["runs"]
    assert len(runs) == 1
    run = runs[0]
    assert run["status"] == "completed" and run["pid"] == srv.get_json("/api/cron/status")["talaria"]["pid"]
    assert "The word is cormorant." in run["output"]
    assert run["session_id"] and run["session_id"].startswith(f"cron_{job['id']}_")
    assert any("Say the word." in str(req) for req in llm.requests())
    shown = srv.get_json(f"/api/session?session_id={run['session_id']}")["session"]
    assert "The word is cormorant." in str(shown["messages"])  # the run's session opens read-only


def test_while_a_gateway_holds_the_agents_lock_talaria_does_not_fire_and_the_gateway_fires_once(srv, llm):
    llm.script(Reply(text="Fired by the gateway."))
    with CronGateway(srv.hermes_home) as gateway:
        job = _create(srv, _soon(1))
        time.sleep(5)  # due for four seconds: Talaria's scheduler ticks every second meanwhile
        assert srv.get_json(f"/api/cron/runs?job_id={job['id']}")["runs"] == []
        assert gateway.tick() == 1
        gateway_pid = gateway.pid
    time.sleep(3)
    runs = srv.get_json(f"/api/cron/runs?job_id={job['id']}")["runs"]
    assert [(run["status"], run["pid"]) for run in runs] == [("completed", gateway_pid)]
    assert "Fired by the gateway." in runs[0]["output"]


def test_run_now_fires_a_paused_schedule_at_once_and_pause_resume_delete_change_the_store(srv, llm):
    llm.script(Reply(text="Ran on request."))
    job = _create(srv, "every 1d")
    paused = srv.post_json("/api/cron/pause", {"job_id": job["id"]})["job"]
    assert paused["state"] == "paused" and paused["enabled"] is False
    resumed = srv.post_json("/api/cron/resume", {"job_id": job["id"]})["job"]
    assert resumed["state"] == "scheduled" and resumed["enabled"] is True

    srv.post_json("/api/cron/run", {"job_id": job["id"]})
    runs = _finished_runs(srv, job["id"], timeout=30)
    assert runs[0]["status"] == "completed", runs[0]["error"]
    assert "Ran on request." in runs[0]["output"]
    listed = srv.get_json("/api/cron/jobs")["jobs"][0]
    assert listed["latest_run"]["status"] == "completed" and listed["next_run_at"]

    edited = srv.post_json("/api/cron/update", {"job_id": job["id"], "schedule": "every 2h", "name": "two"})
    assert edited["job"]["schedule"] == "every 120m" and edited["job"]["name"] == "two"
    assert srv.post_json("/api/cron/delete", {"job_id": job["id"]}) == {"deleted": job["id"]}
    assert srv.get_json("/api/cron/jobs")["jobs"] == []


@pytest.mark.parametrize(
    ("path", "body", "status", "words"),
    [
        ("/api/cron/create", {"prompt": "x", "schedule": "whenever"}, 400, "schedule"),
        ("/api/cron/create", {"prompt": "x", "schedule": "every 0.5q"}, 400, "schedule"),
        ("/api/cron/create", {"prompt": "", "schedule": "every 1h"}, 400, "prompt"),
        ("/api/cron/create", {"prompt": ["x"], "schedule": "every 1h"}, 400, "prompt"),
        ("/api/cron/create", {"prompt": "x", "schedule": "every 1h", "repeat": "twice"}, 400, "repeat"),
        ("/api/cron/create", {"prompt": "x", "schedule": "2001-01-01T00:00"}, 400, "past"),
        ("/api/cron/pause", {"job_id": "0123456789ab"}, 404, "No such cron job"),
        ("/api/cron/run", {"job_id": "../../etc"}, 400, "job_id"),
        ("/api/cron/delete", {}, 400, "job_id"),
        ("/api/cron/update", {"job_id": "0123456789ab", "name": "x"}, 404, "No such cron job"),
    ],
)
def test_bad_input_gets_a_clear_json_error_and_changes_nothing(srv, path, body, status, words):
    got, data = srv.json("POST", path, body)
    assert got == status and words in data["error"]
    assert srv.get_json("/api/cron/jobs")["jobs"] == []


def test_an_unknown_job_s_runs_and_a_bad_edit_get_clear_errors(srv):
    status, data = srv.json("GET", "/api/cron/runs?job_id=0123456789ab")
    assert status == 404 and data["error"] == "No such cron job"
    job = _create(srv, "every 1h")
    status, data = srv.json("POST", "/api/cron/update", {"job_id": job["id"], "schedule": "soonish"})
    assert status == 400 and "schedule" in data["error"]
    status, data = srv.json("POST", "/api/cron/update", {"job_id": job["id"], "deliver": "telegram"})
    assert status == 400 and "deliver" in data["error"]
    assert srv.get_json("/api/cron/jobs")["jobs"][0]["schedule"] == "every 60m"


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _gone_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    return not _alive(pid)


def test_talarias_scheduler_ends_with_the_server_whether_stopped_or_killed(llm, tmp_path):
    server = agent_server(tmp_path, llm.base_url, env={"TALARIA_CRON_SCHEDULER": "1"})
    with server:
        first = server.get_json("/api/cron/status")["talaria"]["pid"]
        assert first and _alive(first)
    assert _gone_within(first, 1.0)

    server.start()
    try:
        second = server.get_json("/api/cron/status")["talaria"]["pid"]
        assert second and second != first
        server.kill()  # no shutdown sequence: the child notices its parent is gone
        assert _gone_within(second, 5.0)
    finally:
        server.stop()


def test_with_talarias_scheduler_off_the_panel_says_nothing_fires_the_jobs(llm, tmp_path):
    server = agent_server(tmp_path, llm.base_url, env={"TALARIA_CRON_SCHEDULER": "0"})
    with server:
        status = server.get_json("/api/cron/status")
        assert status["fired_by"] == "none" and status["talaria"] == {"enabled": False, "pid": None}
        job = _create(server, "every 1h")
        server.post_json("/api/cron/run", {"job_id": job["id"]})
        time.sleep(2)
        assert server.get_json(f"/api/cron/runs?job_id={job['id']}")["runs"] == []

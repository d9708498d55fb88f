"""The agent's cron jobs for the page, through its own cron store (``cron.jobs``): list, create, edit,
pause, resume, run now and delete; each job's runs from the agent's execution log (``cron.executions``)
with the output file and the ``state.db`` session each run left. The agent parses schedules and checks
prompts (``cron.lifecycle_guard``); its ``ValueError`` becomes a 400. Which process fires the jobs is
``api.agent.cron_ticker``'s concern; this module only reads whether the agent's gateway runs.
"""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path
from typing import Any, cast

from api.agent import agent_runtime
from api.rules.errors import BadRequest, NotFound
from api.store import safe_read, state_db

_JOB_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
_PROMPT_MAX = 20_000
_NAME_MAX = 200
_SCHEDULE_MAX = 200
_OUTPUT_MAX = 256 * 1024
_RUNS_MAX = 20
# A run's output file and session carry the wall-clock second they were written; a run owns those
# stamped from its start to a moment after its end.
_STAMP_SLACK_S = 2.0

# The fields of the agent's job record the page shows (the record holds more: delivery, origin, snapshots).
_JOB_FIELDS = (
    "id",
    "name",
    "prompt",
    "schedule_display",
    "enabled",
    "state",
    "next_run_at",
    "last_run_at",
    "last_status",
    "last_error",
    "created_at",
    "paused_at",
    "repeat",
)


def _module(name: str) -> Any:
    return agent_runtime.agent_module(name)


def _text(value: Any, field: str, limit: int, *, required: bool) -> str | None:
    if value is None and not required:
        return None
    if not isinstance(value, str) or (required and not value.strip()):
        raise BadRequest(f"{field} must be non-empty text")
    if len(value) > limit:
        raise BadRequest(f"{field} is longer than {limit} characters")
    return value.strip()


def _job_id(value: Any) -> str:
    if not isinstance(value, str) or not _JOB_ID.fullmatch(value):
        raise BadRequest("job_id must be a cron job's id")
    return value


def _schedule(value: Any) -> str:
    text = _text(value, "schedule", _SCHEDULE_MAX, required=True)
    assert text is not None
    try:
        _module("cron.jobs").parse_schedule(text)
    except ValueError as exc:
        raise BadRequest(f"schedule: {exc}") from exc
    return text


def _repeat(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise BadRequest("repeat must be a whole number of runs, at least 1")
    return value


def _public(job: dict[str, Any]) -> dict[str, Any]:
    row = {name: job.get(name) for name in _JOB_FIELDS}
    row["schedule"] = job.get("schedule_display") or ""
    return row


def _changed() -> None:
    # An external scheduler provider re-arms on a change; the built-in re-reads jobs.json each tick.
    _module("cron.scheduler")._notify_provider_jobs_changed()


def _existing(job_id: Any) -> dict[str, Any]:
    job = _module("cron.jobs").get_job(_job_id(job_id))
    if job is None:
        raise NotFound("No such cron job")
    return cast("dict[str, Any]", job)


def list_jobs() -> dict[str, Any]:
    """Every job, paused ones included, with its latest run."""
    jobs = _module("cron.jobs").list_jobs(include_disabled=True)
    latest = _module("cron.executions").latest_executions([job["id"] for job in jobs])
    rows = []
    for job in jobs:
        row = _public(job)
        run = latest.get(job["id"])
        row["latest_run"] = _run_fields(run) if run else None
        rows.append(row)
    return {"jobs": rows}


def get_job(job_id: Any) -> dict[str, Any]:
    return _public(_existing(job_id))


def create_job(fields: Any) -> dict[str, Any]:
    """A new job from ``prompt``, ``schedule``, optional ``name`` and ``repeat``; delivered locally."""
    if not isinstance(fields, dict):
        raise BadRequest("Expected a JSON object")
    prompt = _text(fields.get("prompt"), "prompt", _PROMPT_MAX, required=True)
    schedule = _schedule(fields.get("schedule"))
    name = _text(fields.get("name"), "name", _NAME_MAX, required=False) or None
    repeat = _repeat(fields.get("repeat"))
    try:
        job = _module("cron.jobs").create_job(prompt, schedule, name=name, repeat=repeat, deliver="local")
    except ValueError as exc:
        raise BadRequest(str(exc)) from exc
    _changed()
    return _public(job)


def update_job(job_id: Any, fields: Any) -> dict[str, Any]:
    """Change a job's ``name``, ``prompt`` or ``schedule`` (the agent recomputes its next run)."""
    job = _existing(job_id)
    if not isinstance(fields, dict):
        raise BadRequest("fields must be a JSON object")
    unknown = set(fields) - {"name", "prompt", "schedule"}
    if unknown:
        raise BadRequest(f"Cannot change {', '.join(sorted(unknown))}")
    updates: dict[str, Any] = {}
    if "name" in fields:
        updates["name"] = _text(fields["name"], "name", _NAME_MAX, required=True)
    if "prompt" in fields:
        updates["prompt"] = _text(fields["prompt"], "prompt", _PROMPT_MAX, required=True)
    if "schedule" in fields:
        updates["schedule"] = _schedule(fields["schedule"])
    if not updates:
        raise BadRequest("Nothing to change")
    try:
        if "prompt" in updates:
            _module("cron.lifecycle_guard").check_gateway_lifecycle(updates["prompt"], job.get("script"))
        updated = _module("cron.jobs").update_job(job["id"], updates)
    except ValueError as exc:
        raise BadRequest(str(exc)) from exc
    if updated is None:
        raise NotFound("No such cron job")
    _changed()
    return _public(updated)


def _act(job_id: Any, action: str) -> dict[str, Any]:
    job = _existing(job_id)
    try:
        result = getattr(_module("cron.jobs"), action)(job["id"])
    except ValueError as exc:
        raise BadRequest(str(exc)) from exc
    if not result:
        raise NotFound("No such cron job")
    _changed()
    return _public(result)


def pause_job(job_id: Any) -> dict[str, Any]:
    return _act(job_id, "pause_job")


def resume_job(job_id: Any) -> dict[str, Any]:
    return _act(job_id, "resume_job")


def run_job_now(job_id: Any) -> dict[str, Any]:
    """Due at once: the next tick of whichever scheduler holds the agent's lock fires it."""
    return _act(job_id, "trigger_job")


def delete_job(job_id: Any) -> dict[str, Any]:
    job = _existing(job_id)
    if not _module("cron.jobs").remove_job(job["id"]):
        raise NotFound("No such cron job")
    _changed()
    return {"deleted": job["id"]}


# ----------------------------------------------------------------------------------------------
# Runs
# ----------------------------------------------------------------------------------------------


def _run_fields(run: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": run.get("id"),
        "status": run.get("status"),
        "started_at": run.get("started_at") or run.get("claimed_at"),
        "finished_at": run.get("finished_at"),
        "error": run.get("error"),
        "pid": run.get("pid"),
        "source": run.get("source"),
    }


def _wall_clock(iso: Any) -> datetime | None:
    # The agent stamps runs, outputs and sessions on its own clock (``hermes_time.now``); compared naive.
    try:
        return datetime.fromisoformat(str(iso)).replace(tzinfo=None)
    except ValueError:
        return None


def _stamp(text: str, pattern: str) -> datetime | None:
    try:
        return datetime.strptime(text, pattern)
    except ValueError:
        return None


def _owned(stamps: list[tuple[datetime, Any]], start: datetime | None, end: datetime | None) -> Any:
    if start is None:
        return None
    last = end or datetime.max
    for stamp, value in stamps:
        if (start - stamp).total_seconds() <= _STAMP_SLACK_S and (
            stamp - last
        ).total_seconds() <= _STAMP_SLACK_S:
            return value
    return None


def _outputs(job_id: str) -> list[tuple[datetime, Path]]:
    folder = _module("cron.jobs").get_cron_output_dir() / job_id
    try:
        names = sorted((p.name for p in folder.iterdir() if p.suffix == ".md"), reverse=True)
    except OSError:
        return []
    found = []
    for name in names[: _RUNS_MAX * 2]:
        stamp = _stamp(Path(name).stem, "%Y-%m-%d_%H-%M-%S")
        if stamp is not None:
            found.append((stamp, folder / name))
    return found


def _read_output(path: Path | None) -> str | None:
    if path is None:
        return None
    try:
        read = safe_read.read_regular_file(path, limit=_OUTPUT_MAX)
    except (OSError, safe_read.UnsafeFile):
        return None
    return None if read is None else read[1].decode("utf-8", errors="replace")


def _sessions(job_id: str) -> list[tuple[datetime, str]]:
    prefix = f"cron_{job_id}_"
    found = []
    for sid in state_db.session_ids_with_prefix(prefix, limit=_RUNS_MAX * 2):
        stamp = _stamp(sid[len(prefix) :], "%Y%m%d_%H%M%S")
        if stamp is not None:
            found.append((stamp, sid))
    return found


def job_runs(job_id: Any) -> dict[str, Any]:
    """The job's newest runs: status, times, the firing process, the output and the agent session."""
    job_id = _job_id(job_id)
    # A one-shot job leaves the store once it ran; its runs stay in the agent's execution log.
    job = _module("cron.jobs").get_job(job_id)
    runs = _module("cron.executions").list_executions(job_id=job_id, limit=_RUNS_MAX)
    if job is None and not runs:
        raise NotFound("No such cron job")
    outputs, sessions = _outputs(job_id), _sessions(job_id)
    rows = []
    for run in runs:
        row = _run_fields(run)
        start, end = _wall_clock(row["started_at"]), _wall_clock(row["finished_at"])
        row["output"] = _read_output(_owned(outputs, start, end)) if end else None
        row["session_id"] = _owned(sessions, start, end)
        rows.append(row)
    return {"job": _public(job) if job else None, "runs": rows}


def gateway_pid() -> int | None:
    """The agent's gateway process for this home (its own PID-file check), or None."""
    try:
        pid = _module("gateway.status").get_running_pid(cleanup_stale=False)
    except Exception:  # noqa: BLE001 - an unreadable PID file means no gateway known
        return None
    return int(pid) if pid else None

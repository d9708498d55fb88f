// The agent's cron jobs in the toolbox: which process fires them, a form to create or edit one, each job
// with run now / pause / resume / delete, and its runs with their status, output and session.

import { getJSON, postJSON } from "./api.js";
import { el } from "./dom.js";
import { toast, toastError } from "./toast.js";

const REFRESH_MS = 1500;

function awaitingRun(job) {
  const running = job.latest_run && ["claimed", "running"].includes(job.latest_run.status);
  const due = job.state === "scheduled" && job.next_run_at && new Date(job.next_run_at).getTime() <= Date.now();
  return running || due;
}

function firedByText(scheduler) {
  const talaria = scheduler.talaria.pid;
  const gateway = scheduler.gateway.pid;
  switch (scheduler.fired_by) {
    case "both":
      return `Talaria's scheduler (process ${talaria}) and the agent's gateway (process ${gateway}) both run the agent's scheduler; its lock lets only one of them fire each job.`;
    case "talaria":
      return `Talaria fires the jobs: it runs the agent's scheduler (process ${talaria}) every ${scheduler.tick_seconds} s.`;
    case "gateway":
      return `The agent's gateway (process ${gateway}) fires the jobs; Talaria's scheduler is off.`;
    default:
      return "Nothing fires the jobs: Talaria's scheduler is off and the agent's gateway is not running.";
  }
}

function when(iso) {
  if (!iso) return "—";
  const date = new Date(iso);
  return Number.isNaN(date.getTime()) ? String(iso) : date.toLocaleString();
}

function smallButton(label, onClick, kind = "") {
  const node = el("button", `btn btn-small${kind ? ` ${kind}` : ""}`, label);
  node.type = "button";
  node.addEventListener("click", onClick);
  return node;
}

function field(labelText, input) {
  const wrap = el("label", "cron-field");
  wrap.append(el("span", "cron-field-label", labelText), input);
  return wrap;
}

// The create form, or the edit form of `job`; `done` runs after a save.
function jobForm(job, done) {
  const form = el("form", "cron-form");
  form.noValidate = true;
  const name = el("input", "toolbox-input");
  name.name = "name";
  name.value = job?.name || "";
  name.placeholder = "Morning summary";
  const schedule = el("input", "toolbox-input");
  schedule.name = "schedule";
  schedule.value = job?.schedule || "";
  schedule.placeholder = "every 1h · 30m · 0 9 * * * · 2026-12-24T09:00";
  const prompt = el("textarea", "toolbox-text cron-prompt");
  prompt.name = "prompt";
  prompt.value = job?.prompt || "";
  prompt.placeholder = "What the agent does each time, in a self-contained instruction.";
  const error = el("p", "form-error");
  error.setAttribute("role", "alert");
  const save = el("button", "btn btn-primary", job ? "Save job" : "Create job");
  save.type = "submit";
  const foot = el("div", "toolbox-file-foot");
  foot.append(el("span", "toolbox-muted", "The agent's own schedule syntax; runs are kept in its cron folder."), save);
  form.append(field("Name", name), field("Schedule", schedule), field("Prompt", prompt), error, foot);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    error.textContent = "";
    const body = { name: name.value.trim() || null, schedule: schedule.value, prompt: prompt.value };
    try {
      if (job) {
        if (!body.name) delete body.name;
        await postJSON("/api/cron/update", { job_id: job.id, ...body });
        toast("Job saved.");
      } else {
        await postJSON("/api/cron/create", body);
        toast("Job created.");
      }
      done();
    } catch (err) {
      error.textContent = err.message;
    }
  });
  return form;
}

function runFiredBy(run, scheduler) {
  if (run.pid && run.pid === scheduler.talaria.pid) return "fired by Talaria";
  if (run.pid && run.pid === scheduler.gateway.pid) return "fired by the agent's gateway";
  return run.pid ? `fired by process ${run.pid}` : "";
}

function runRow(run, scheduler) {
  const row = el("section", "cron-run");
  const head = el("div", "toolbox-row-name");
  head.append(el("span", `toolbox-badge cron-status cron-status-${run.status}`, run.status), el("span", "cron-run-time", when(run.started_at)));
  const facts = el("div", "toolbox-muted", runFiredBy(run, scheduler));
  row.append(head, facts);
  if (run.error) row.append(el("p", "form-error", run.error));
  if (run.session_id) {
    const link = el("a", "cron-session", "Open the run's session");
    link.href = `#/s/${encodeURIComponent(run.session_id)}`;
    link.addEventListener("click", () => link.closest("dialog")?.close());
    row.append(link);
  }
  if (run.output) {
    // The agent's output file opens with the job's prompt; its answer follows under "## Response".
    const marker = run.output.indexOf("\n## Response\n");
    const answer = marker >= 0 ? run.output.slice(marker + "\n## Response\n".length).trim() : run.output;
    row.append(el("pre", "cron-output", answer));
    if (marker >= 0) {
      const whole = el("details", "cron-whole");
      whole.append(el("summary", null, "The whole output file"), el("pre", "cron-output", run.output));
      row.append(whole);
    }
  }
  return row;
}

async function runsView(pane, job, scheduler, back) {
  const data = await getJSON(`/api/cron/runs?job_id=${encodeURIComponent(job.id)}`);
  const box = el("div", "toolbox-pane");
  const head = el("div", "toolbox-pane-head");
  head.append(smallButton("← All jobs", back), el("h3", "toolbox-file-title", `Runs of ${job.name || job.id}`));
  box.append(head);
  if (!data.runs.length) box.append(el("p", "toolbox-muted", "No runs yet."));
  for (const run of data.runs) box.append(runRow(run, scheduler));
  pane.replaceChildren(box);
}

function jobRow(job, scheduler, { pane, reload }) {
  const row = el("section", "cron-job");
  row.dataset.jobId = job.id;
  const head = el("div", "toolbox-row-name");
  head.append(el("span", "cron-job-name", job.name || job.id), el("span", `toolbox-badge cron-state-${job.state}`, job.state));
  const latest = job.latest_run;
  const facts = el("div", "toolbox-muted cron-facts");
  facts.textContent = `${job.schedule} · next ${when(job.next_run_at)}${latest ? ` · last run ${latest.status} ${when(latest.started_at)}` : ""}`;
  const act = (path, message) => async () => {
    try {
      await postJSON(path, { job_id: job.id });
      toast(message);
      reload();
    } catch (err) {
      toastError(err);
    }
  };
  const actions = el("div", "cron-actions");
  actions.append(
    smallButton("Run now", act("/api/cron/run", "The job runs at the next tick.")),
    job.state === "paused" ? smallButton("Resume", act("/api/cron/resume", "Job resumed.")) : smallButton("Pause", act("/api/cron/pause", "Job paused.")),
    smallButton("Edit", () => {
      const box = el("div", "toolbox-pane");
      const head2 = el("div", "toolbox-pane-head");
      head2.append(smallButton("← All jobs", reload), el("h3", "toolbox-file-title", `Edit ${job.name || job.id}`));
      box.append(head2, jobForm(job, reload));
      pane.replaceChildren(box);
    }),
    smallButton("Runs", () => runsView(pane, job, scheduler, reload).catch(toastError)),
    smallButton("Delete", async () => {
      if (!window.confirm(`Delete the job ${job.name || job.id} and its saved outputs?`)) return;
      await act("/api/cron/delete", "Job deleted.")();
    }, "btn-danger"),
  );
  row.append(head, el("div", "cron-prompt-text", job.prompt), facts, actions);
  return row;
}

export async function cronTab(pane, reshow) {
  const data = await getJSON("/api/cron/jobs");
  const context = { pane, reload: reshow };
  const box = el("div", "toolbox-pane");
  box.append(el("p", `cron-fired-by cron-fired-by-${data.scheduler.fired_by}`, firedByText(data.scheduler)));
  const list = el("div", "cron-jobs");
  if (!data.jobs.length) list.append(el("p", "toolbox-muted", "No cron jobs yet."));
  for (const job of data.jobs) list.append(jobRow(job, data.scheduler, context));
  const create = el("details", "cron-create");
  create.open = !data.jobs.length;
  create.append(el("summary", null, "New job"), jobForm(null, reshow));
  box.append(list, create);
  if (data.jobs.some(awaitingRun)) {
    // A job due now or running: look again shortly, in place, while the tab still shows this list.
    setTimeout(async () => {
      if (!box.isConnected || create.open) return;
      try {
        const fresh = await cronTab(pane, reshow);
        if (box.isConnected) box.replaceWith(fresh);
      } catch (err) {
        toastError(err);
      }
    }, REFRESH_MS);
  }
  return box;
}

// The labels of a long-running work card: elapsed time, its state and its latest step.
import assert from "node:assert/strict";
import { test } from "node:test";

import { elapsedLabel, elapsedOf, goalStateLabel, goalStepLabel, stateLabel, stepLabel } from "../../static/js/work_cards.js";

test("elapsed time reads in seconds, then minutes, then hours", () => {
  assert.equal(elapsedLabel(42.7), "42 s");
  assert.equal(elapsedLabel(185), "3 min 5 s");
  assert.equal(elapsedLabel(3720), "1 h 2 min");
  assert.equal(elapsedLabel(-3), "0 s");
});

test("a running card counts from its start; an ended one keeps its own duration", () => {
  assert.equal(elapsedOf({ started_at: 100 }, 130), 30);
  assert.equal(elapsedOf({ started_at: 100, ended_at: 110 }, 500), 10);
  assert.equal(elapsedOf({ started_at: 100, ended_at: 110, duration_seconds: 9.5 }, 500), 9.5);
});

test("a running card ticks while its turn streams and reads as last seen once the turn is gone", () => {
  assert.equal(stateLabel({ status: "running", started_at: 0 }, 12, true), "running · 12 s");
  assert.equal(stateLabel({ status: "running", started_at: 0 }, 12, false), "last seen running");
  assert.equal(stateLabel({ status: "completed", duration_seconds: 63 }, 0, false), "done · 1 min 3 s");
  assert.equal(stateLabel({ status: "timeout", duration_seconds: 5 }, 0, false), "timed out · 5 s");
});

test("the step names the tool in use and what it works on, then how many calls the subagent made", () => {
  assert.equal(stepLabel({ status: "running", tool: "terminal", step: "ls -la", tool_count: 2 }), "terminal: ls -la (2 tool calls)");
  assert.equal(stepLabel({ status: "running", tool: null, step: "", tool_count: 0 }), "starting…");
  assert.equal(stepLabel({ status: "completed", tool_count: 1 }), "Used 1 tool call");
});

test("a background process's step is its latest output line, then its exit code", () => {
  assert.equal(stepLabel({ kind: "process", status: "running", step: "listening on :8000" }), "listening on :8000");
  assert.equal(stepLabel({ kind: "process", status: "running", step: "" }), "started");
  assert.equal(stepLabel({ kind: "process", status: "failed", exit_code: 2 }), "Exit code 2");
  assert.equal(stateLabel({ kind: "process", status: "lost", started_at: 0, ended_at: 4 }, 9, false), "no longer followed · 4 s");
});

test("a goal's card reads its status, the turns used of its budget and the judge's last verdict", () => {
  const card = { kind: "goal", status: "active", iteration: 2, max_turns: 20, verdict: "continue", reason: "one step remains" };
  assert.equal(goalStateLabel(card), "active · 2 of 20 turns");
  assert.equal(goalStepLabel(card), "Judge: continue — one step remains");
  assert.equal(goalStateLabel({ ...card, status: "done", iteration: 1, max_turns: 1 }), "done · 1 of 1 turn");
  assert.equal(goalStepLabel({ kind: "goal", status: "active", iteration: 0 }), "working on the first turn…");
  assert.equal(goalStepLabel({ kind: "goal", status: "stopped", iteration: 0 }), "");
});

// Long-running work as cards: a subagent `delegate_task` started (its goal, the tool in use, the latest
// step), a background process the terminal tool started (its command, its latest output line), with the
// time it has run and, once it ends, its result, or the session's standing goal (the agent's `/goal` loop:
// turns used of its budget, the judge's last verdict, why it paused). Live cards come from `work` events (the
// card whole each time); saved ones from the answer row's `work_cards`. A card saved as running whose turn
// is over is shown as last seen: the server stopped before it ended.

import { el } from "./dom.js";

const STATUS_TEXT = {
  completed: "done",
  failed: "failed",
  error: "failed",
  timeout: "timed out",
  stopped: "stopped",
  interrupted: "interrupted",
  lost: "no longer followed",
};

// "42 s", "3 min 5 s", "1 h 2 min".
export function elapsedLabel(seconds) {
  const total = Math.max(0, Math.floor(Number(seconds) || 0));
  if (total < 60) return `${total} s`;
  const minutes = Math.floor(total / 60);
  if (minutes < 60) return `${minutes} min ${total % 60} s`;
  return `${Math.floor(minutes / 60)} h ${minutes % 60} min`;
}

// The seconds a card has run: its own duration once ended, else from its start to `now` (seconds).
export function elapsedOf(card, now) {
  if (typeof card.duration_seconds === "number") return card.duration_seconds;
  const end = typeof card.ended_at === "number" ? card.ended_at : now;
  return typeof card.started_at === "number" ? end - card.started_at : 0;
}

// The state line of a card: "running · 12 s", "done · 1 min 3 s", "last seen running".
export function stateLabel(card, now, live) {
  if (card.status === "running") return live ? `running · ${elapsedLabel(elapsedOf(card, now))}` : "last seen running";
  return `${STATUS_TEXT[card.status] || card.status || "done"} · ${elapsedLabel(elapsedOf(card, now))}`;
}

// The step line: the tool in use and what it works on, else the latest thought.
export function stepLabel(card) {
  if (card.kind === "process") {
    if (card.status === "running") return card.step || "started";
    return typeof card.exit_code === "number" ? `Exit code ${card.exit_code}` : "";
  }
  const tools = card.tool_count ? ` (${card.tool_count} tool call${card.tool_count === 1 ? "" : "s"})` : "";
  if (card.status !== "running") return card.tool_count ? `Used ${card.tool_count} tool call${card.tool_count === 1 ? "" : "s"}` : "";
  if (card.tool) return `${card.tool}${card.step ? `: ${card.step}` : ""}${tools}`;
  return card.step ? `${card.step}${tools}` : `starting…${tools}`;
}

const GOAL_STATUS_TEXT = { active: "active", paused: "paused", done: "done", stopped: "stopped" };

// A goal's state line: "active · 2 of 20 turns".
export function goalStateLabel(card) {
  const turns = Number(card.iteration) || 0;
  const budget = Number(card.max_turns) || 0;
  const used = budget ? `${turns} of ${budget} turn${budget === 1 ? "" : "s"}` : `${turns} turn${turns === 1 ? "" : "s"}`;
  return `${GOAL_STATUS_TEXT[card.status] || card.status || "active"} · ${used}`;
}

// A goal's step line: the judge's last verdict and reason, or that no turn was judged yet.
export function goalStepLabel(card) {
  if (!card.verdict) return card.status === "active" ? "working on the first turn…" : "";
  return `Judge: ${card.verdict}${card.reason ? ` — ${card.reason}` : ""}`;
}

function fillGoal(node, card) {
  node.work = card;
  node.dataset.status = card.status || "active";
  node.classList.toggle("work-ended", card.status !== "active");
  node.querySelector(".work-goal").textContent = card.goal || "Goal";
  node.querySelector(".work-state").textContent = goalStateLabel(card);
  node.querySelector(".work-step").textContent = goalStepLabel(card);
  const summary = node.querySelector(".work-summary");
  summary.textContent = card.status === "paused" && card.paused_reason ? `Paused: ${card.paused_reason}` : "";
  summary.hidden = !summary.textContent;
}

function fill(node, card, live) {
  if (card.kind === "goal") {
    fillGoal(node, card);
    return;
  }
  node.work = card;
  node.dataset.status = card.status || "running";
  node.classList.toggle("work-ended", card.status !== "running");
  node.classList.toggle("work-failed", ["failed", "error", "timeout"].includes(card.status));
  node.querySelector(".work-goal").textContent = card.goal || (card.kind === "process" ? "a command" : "Subagent");
  node.querySelector(".work-state").textContent = stateLabel(card, Date.now() / 1000, live);
  node.querySelector(".work-step").textContent = stepLabel(card);
  const summary = node.querySelector(".work-summary");
  summary.textContent = card.summary || "";
  summary.hidden = !card.summary;
}

// A card's element; `live` while its turn streams (its time ticks through `tick`).
export function workCard(card, { live = false } = {}) {
  const node = el("section", "work-card");
  node.dataset.workId = card.id || "";
  const process = card.kind === "process";
  const goal = card.kind === "goal";
  if (process) node.classList.add("work-process");
  if (goal) node.classList.add("work-goal-card");
  const kind = process ? "Background process" : goal ? "Goal" : "Subagent";
  node.setAttribute("aria-label", kind);
  const head = el("div", "work-head");
  const task = card.task_count > 1 ? ` ${card.task_index + 1}/${card.task_count}` : "";
  head.append(el("span", "work-kind", goal || process ? kind : `Subagent${task}`), el("span", "work-state"));
  node.append(head, el("div", "work-goal"), el("div", "work-step"), el("div", "work-summary"));
  fill(node, card, live);
  return node;
}

export function updateWorkCard(node, card, { live = false } = {}) {
  fill(node, card, live);
}

// Refreshes the elapsed time of the running cards under `root`.
export function tick(root) {
  const now = Date.now() / 1000;
  for (const node of root.querySelectorAll(".work-card[data-status='running']")) {
    node.querySelector(".work-state").textContent = stateLabel(node.work, now, true);
  }
}

// A goal's card is one across its turns: the copy an earlier turn shows goes when a newer one arrives.
export function dropOtherCopies(root, node) {
  if (node.work?.kind !== "goal") return;
  for (const other of root.querySelectorAll(".work-card.work-goal-card")) {
    if (other !== node && other.dataset.workId === node.dataset.workId) other.remove();
  }
}

// Puts `node` after the card of the tool call that started it (and its earlier siblings), else at the end.
export function placeWorkCard(container, node, toolCard) {
  if (!toolCard) {
    container.append(node);
    return;
  }
  let after = toolCard;
  while (after.nextElementSibling?.classList.contains("work-card")) after = after.nextElementSibling;
  after.after(node);
}

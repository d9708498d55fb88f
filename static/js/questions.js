// Questions the agent asks while a turn runs: the approval card (the exact command, four choices, the
// session's "don't ask again" switch) and the clarify card (its choices or a text box). Both live in the
// answer being streamed; a replayed journal (reload, second tab) shows a waiting question again, and its
// `*_resolved` event settles the card.

import { ApiError, getJSON, postJSON } from "./api.js";
import { el } from "./dom.js";

export const questionApi = {
  respondApproval: (sessionId, approvalId, choice) =>
    postJSON("/api/approval/respond", { session_id: sessionId, approval_id: approvalId, choice }),
  setYolo: (sessionId, enabled) => postJSON("/api/approval/yolo", { session_id: sessionId, enabled }),
  approvalPending: (sessionId) => getJSON("/api/approval/pending", { session_id: sessionId }),
  respondClarify: (sessionId, clarifyId, response) =>
    postJSON("/api/clarify/respond", { session_id: sessionId, clarify_id: clarifyId, response }),
};

const APPROVAL_CHOICES = [
  ["once", "Allow once", "btn-primary"],
  ["session", "Allow for this session", ""],
  ["always", "Always allow", ""],
  ["deny", "Deny", "btn-danger"],
];

const SETTLED_TEXT = {
  once: "Allowed once.",
  session: "Allowed for this session.",
  always: "Always allowed.",
  deny: "Denied. The command did not run.",
};

function waitText(seconds) {
  const whole = Math.max(0, Math.round(seconds));
  return whole >= 120 ? `${Math.round(whole / 60)} minutes` : `${whole} seconds`;
}

function errorLine(card) {
  let line = card.querySelector(".question-error");
  if (!line) {
    line = el("p", "question-error");
    line.setAttribute("role", "alert");
    card.append(line);
  }
  return line;
}

function settle(card, text) {
  card.classList.add("question-settled");
  for (const control of card.querySelectorAll("button, input, textarea")) control.disabled = true;
  card.querySelector(".question-outcome").textContent = text;
  card.querySelector(".question-error")?.remove();
}

// Posts an answer; a 404/409 means the question was settled elsewhere (another tab, its deadline).
async function answer(card, post) {
  const controls = [...card.querySelectorAll("button, input, textarea")];
  for (const control of controls) control.disabled = true;
  try {
    await post();
    return true;
  } catch (err) {
    const gone = err instanceof ApiError && (err.status === 404 || err.status === 409);
    errorLine(card).textContent = gone ? "This question is no longer waiting." : err.message;
    if (!gone) for (const control of controls) control.disabled = false;
    return false;
  }
}

export function approvalCard(sessionId, data, { yolo = false } = {}) {
  const card = el("section", "question-card approval-card");
  card.dataset.approvalId = data.approval_id || "";
  card.setAttribute("aria-label", "Approval needed");
  card.append(el("h3", "question-title", "Approval needed"));
  card.append(el("p", "question-text", data.description ? `Hermes wants to run a command flagged as: ${data.description}` : "Hermes wants to run a flagged command."));
  const pre = el("pre", "approval-command");
  pre.append(el("code", null, data.command || ""));
  card.append(pre);
  card.append(
    el(
      "p",
      "approval-exact",
      data.masked
        ? "This is the command that runs; only secret values written in it are masked."
        : "This is exactly the command that runs.",
    ),
  );
  const row = el("div", "question-actions");
  for (const [choice, label, style] of APPROVAL_CHOICES) {
    if (choice === "always" && data.allow_permanent === false) continue;
    const button = el("button", `btn btn-small ${style}`.trim(), label);
    button.type = "button";
    button.dataset.choice = choice;
    button.addEventListener("click", async () => {
      const ok = await answer(card, () => questionApi.respondApproval(sessionId, data.approval_id, choice));
      if (ok) settle(card, SETTLED_TEXT[choice]);
    });
    row.append(button);
  }
  card.append(row);
  const toggle = el("label", "check question-yolo");
  const box = document.createElement("input");
  box.type = "checkbox";
  box.checked = Boolean(yolo);
  box.addEventListener("change", async () => {
    try {
      const result = await questionApi.setYolo(sessionId, box.checked);
      box.checked = Boolean(result.yolo);
      window.dispatchEvent(new CustomEvent("talaria:yolo", { detail: { sessionId, yolo: box.checked } }));
    } catch (err) {
      box.checked = !box.checked;
      errorLine(card).textContent = err.message;
    }
  });
  const follow = (event) => {
    if (!box.isConnected) return window.removeEventListener("talaria:yolo", follow);
    if (event.detail?.sessionId === sessionId) box.checked = Boolean(event.detail.yolo);
  };
  window.addEventListener("talaria:yolo", follow);
  toggle.append(box, " Don't ask again in this session (later flagged commands run without asking)");
  card.append(toggle);
  if (Number.isFinite(data.expires_in)) {
    card.append(el("p", "question-deadline", `No answer within ${waitText(data.expires_in)} means deny.`));
  }
  card.append(el("p", "question-outcome"));
  return card;
}

export function settleApproval(card, data) {
  if (!card || card.classList.contains("question-settled")) return;
  const text = data.outcome === "answered" ? SETTLED_TEXT[data.choice] || "Answered." : `Denied: ${data.reason || "no answer"}. The command did not run.`;
  settle(card, text);
}

export function clarifyCard(sessionId, data) {
  const card = el("section", "question-card clarify-card");
  card.dataset.clarifyId = data.clarify_id || "";
  card.setAttribute("aria-label", "Hermes asks");
  card.append(el("h3", "question-title", "Hermes asks"));
  card.append(el("p", "question-text", data.question || ""));
  const send = async (text) => {
    const ok = await answer(card, () => questionApi.respondClarify(sessionId, data.clarify_id, text));
    if (ok) settle(card, `Answered: ${text}`);
  };
  if (Array.isArray(data.choices) && data.choices.length) {
    const row = el("div", "question-actions");
    for (const choice of data.choices) {
      const button = el("button", "btn btn-small", choice);
      button.type = "button";
      button.addEventListener("click", () => send(choice));
      row.append(button);
    }
    card.append(row);
  }
  const form = el("form", "clarify-form");
  const input = document.createElement("textarea");
  input.rows = 1;
  input.className = "clarify-input";
  input.placeholder = data.choices?.length ? "Or type another answer" : "Type your answer";
  input.setAttribute("aria-label", "Your answer");
  const submit = el("button", "btn btn-small btn-primary", "Send");
  submit.type = "submit";
  form.append(input, submit);
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const text = input.value.trim();
    if (text) send(text);
  });
  input.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey) {
      event.preventDefault();
      form.requestSubmit();
    }
  });
  card.append(form);
  if (Number.isFinite(data.expires_in)) {
    card.append(el("p", "question-deadline", `Hermes goes on without an answer after ${waitText(data.expires_in)}.`));
  }
  card.append(el("p", "question-outcome"));
  return card;
}

export function settleClarify(card, data) {
  if (!card || card.classList.contains("question-settled")) return;
  const reasons = { timeout: "nobody answered in time", cancelled: "the turn was stopped", stopped: "the server stopped" };
  settle(card, data.outcome === "answered" ? "Answered." : `No answer (${reasons[data.outcome] || "not answered"}).`);
}

// Shows or settles a question inside the live answer, for the turn events of that name.
export function showQuestion(live, name, data) {
  const find = (selector) => live.article.querySelector(selector);
  if (name === "approval") {
    if (find(`.approval-card[data-approval-id="${CSS.escape(data.approval_id || "")}"]`)) return;
    const card = approvalCard(live.sessionId, data);
    live.article.append(card);
    live.setStatus("waiting for your approval…");
    questionApi
      .approvalPending(live.sessionId)
      .then((state) => {
        card.querySelector(".question-yolo input").checked = Boolean(state.yolo);
      })
      .catch(() => {});
  } else if (name === "approval_resolved") {
    settleApproval(find(`.approval-card[data-approval-id="${CSS.escape(data.approval_id || "")}"]`), data);
    live.setStatus("");
  } else if (name === "clarify") {
    if (find(`.clarify-card[data-clarify-id="${CSS.escape(data.clarify_id || "")}"]`)) return;
    live.article.append(clarifyCard(live.sessionId, data));
    live.setStatus("waiting for your answer…");
  } else if (name === "clarify_resolved") {
    settleClarify(find(`.clarify-card[data-clarify-id="${CSS.escape(data.clarify_id || "")}"]`), data);
    live.setStatus("");
  }
}

// The session's "don't ask again" state in the header: visible whenever it is on, with a way back.
export class YoloIndicator {
  constructor(root) {
    this.root = root;
    this.sessionId = null;
    this.root.replaceChildren(
      el("span", "yolo-long", "Not asking before commands — ask again"),
      el("span", "yolo-short", "Not asking ✕"),
    );
    this.root.title = "Flagged commands in this session run without asking. Click to be asked again.";
    this.root.addEventListener("click", async () => {
      if (!this.sessionId) return;
      const sessionId = this.sessionId;
      const result = await questionApi.setYolo(sessionId, false).catch(() => null);
      if (result) window.dispatchEvent(new CustomEvent("talaria:yolo", { detail: { sessionId, yolo: result.yolo } }));
    });
    window.addEventListener("talaria:yolo", (event) => {
      if (event.detail?.sessionId === this.sessionId) this.show(event.detail.yolo);
    });
  }

  setSession(session) {
    const sid = session && !session.read_only ? session.session_id || session.id : null;
    if (sid === this.sessionId) return;
    this.sessionId = sid;
    this.show(false);
    if (!sid) return;
    questionApi
      .approvalPending(sid)
      .then((state) => {
        if (this.sessionId === sid) this.show(state.yolo);
      })
      .catch(() => {});
  }

  show(on) {
    this.root.hidden = !on;
  }
}

// Acting on messages: copy a code block or a whole message (as Markdown), edit a user message,
// regenerate the last answer, retry a turn that failed, branch a new session from any message. Buttons carry `data-action`;
// the chat view handles clicks on them in one listener.

import { el } from "./dom.js";
import { messageText } from "./render.js";
import { toast } from "./toast.js";

// A copy button in each code block; its label is drawn by CSS, so the block's text stays the code.
export function decorateCode(root) {
  for (const pre of root.querySelectorAll(".msg-body pre")) {
    if (pre.querySelector(":scope > .copy-code")) continue;
    const button = el("button", "copy-code");
    button.type = "button";
    button.dataset.action = "copy-code";
    button.setAttribute("aria-label", "Copy code");
    pre.prepend(button);
  }
}

function actionButton(action, label, aria) {
  const button = el("button", "link-btn msg-action", label);
  button.type = "button";
  button.dataset.action = action;
  if (aria) button.setAttribute("aria-label", aria);
  return button;
}

// A row the model wrote (an answer, a tool call or its result), as opposed to an error note.
function isAnswer(m) {
  if (m._error) return false;
  if (m.role === "tool") return true;
  return m.role === "assistant" && Boolean(messageText(m).trim() || (Array.isArray(m.tool_calls) && m.tool_calls.length));
}

// Failed turns: a user row no answer followed (only error notes, or nothing). Each maps the row that
// carries the turn's Retry (its last error note, else the user row) to the user row.
export function failedTurns(messages) {
  const retryOn = new Map();
  let user = null;
  let answered = false;
  let note = null;
  const close = () => {
    if (user && !answered) retryOn.set(note || user, user);
  };
  for (const m of messages) {
    if (m.role === "user") {
      close();
      user = m;
      answered = false;
      note = null;
    } else if (isAnswer(m)) answered = true;
    else if (m._error) note = m;
  }
  close();
  return retryOn;
}

// The action bar of each rendered message row.
export function decorateMessages(list, messages, { readOnly, streaming }) {
  const byIdx = new Map(messages.map((m) => [String(m._idx), m]));
  let lastUser = null;
  let lastAnswer = null;
  for (const m of messages) {
    if (m.role === "user") lastUser = m;
    else if (isAnswer(m) && m.role === "assistant") lastAnswer = m;
  }
  const retryOn = streaming || readOnly ? new Map() : failedTurns(messages);
  for (const article of list.querySelectorAll(".msg[data-idx]")) {
    article.querySelector(":scope > .msg-actions")?.remove();
    const msg = byIdx.get(article.dataset.idx);
    if (!msg || msg._pending || readOnly || !(msg.role === "user" || msg.role === "assistant")) continue;
    const bar = el("div", "msg-actions");
    if (messageText(msg)) bar.append(actionButton("copy", "Copy", "Copy this message as Markdown"));
    if (!streaming) {
      if (msg.role === "user") {
        const isLast = msg === lastUser;
        bar.append(actionButton("edit", "Edit", isLast ? "Edit your last message and resend" : "Edit this message"));
      }
      if (msg === lastAnswer && lastUser && lastAnswer._idx > lastUser._idx) {
        bar.append(actionButton("regenerate", "Regenerate", "Regenerate the last answer"));
      }
      bar.append(actionButton("branch", "Branch", "Branch a new session from this message"));
    }
    if (retryOn.has(msg)) {
      // Always shown (not only on hover): the turn needs the person's next step.
      const retry = actionButton("retry", "Retry", "Send this message again");
      retry.classList.add("msg-action-retry");
      bar.prepend(retry);
      bar.classList.add("has-retry");
    }
    if (bar.childElementCount) article.append(bar);
  }
  decorateCode(list);
}

export async function copyText(text) {
  try {
    await navigator.clipboard.writeText(text);
  } catch {
    // Without clipboard permission (or outside a secure context) a selected textarea still copies.
    const area = el("textarea", "visually-hidden");
    area.value = text;
    document.body.append(area);
    area.select();
    const ok = document.execCommand("copy");
    area.remove();
    if (!ok) {
      toast("Copying is blocked by the browser.", { kind: "error" });
      return false;
    }
  }
  toast("Copied.", { timeout: 1500 });
  return true;
}

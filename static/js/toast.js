// Short notices at the top of the conversation (never over the composer), optionally with one action
// (e.g. Undo). At most MAX_TOASTS show at once: a new one pushes the oldest out.

import { el } from "./render.js";

const root = () => document.getElementById("toasts");
const MAX_TOASTS = 3;

export function toast(message, { action, onAction, timeout = 4000, kind = "info" } = {}) {
  const box = el("div", `toast toast-${kind}`);
  box.setAttribute("role", kind === "error" ? "alert" : "status");
  box.append(el("span", "toast-text", message));
  let timer = null;
  const dismiss = () => {
    clearTimeout(timer);
    box.remove();
  };
  if (action && onAction) {
    const button = el("button", "btn btn-small toast-action", action);
    button.type = "button";
    button.addEventListener("click", async () => {
      button.disabled = true;
      try {
        await onAction();
      } finally {
        dismiss();
      }
    });
    box.append(button);
  }
  const close = el("button", "icon-btn toast-close", "×");
  close.type = "button";
  close.setAttribute("aria-label", "Dismiss");
  close.addEventListener("click", dismiss);
  box.append(close);
  root().append(box);
  while (root().childElementCount > MAX_TOASTS) root().firstElementChild.remove();
  if (timeout) timer = setTimeout(dismiss, timeout);
  return dismiss;
}

export function toastError(err) {
  return toast(err && err.message ? err.message : String(err), { kind: "error", timeout: 8000 });
}

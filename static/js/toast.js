// Short notices at the bottom of the screen, optionally with one action (e.g. Undo).

import { el } from "./render.js";

const root = () => document.getElementById("toasts");

export function toast(message, { action, onAction, timeout = 6000, kind = "info" } = {}) {
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
  if (timeout) timer = setTimeout(dismiss, timeout);
  return dismiss;
}

export function toastError(err) {
  return toast(err && err.message ? err.message : String(err), { kind: "error", timeout: 8000 });
}

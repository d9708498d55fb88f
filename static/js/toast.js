// Short notices at the top of the conversation (never over the composer), optionally with one action
// (e.g. Undo). At most MAX_TOASTS show at once: a new one pushes the oldest out.

import { el } from "./dom.js";

const root = () => document.getElementById("toasts");
const MAX_TOASTS = 3;
const GAP_PX = 8;

// Toasts start where the transcript starts, so the header and the lines under it (the branch line, a
// banner, a note) stay readable whatever their height.
function placeBelowHeader() {
  const transcript = document.getElementById("transcript");
  const top = transcript && transcript.getClientRects().length ? transcript.getBoundingClientRect().top : 0;
  root().style.top = top > 0 ? `${Math.round(top) + GAP_PX}px` : "";
}

// The transcript's top moves when the header wraps or a line appears under it: its height changes too.
let watching = false;
function watchHeader() {
  const transcript = document.getElementById("transcript");
  if (watching || !transcript) return;
  watching = true;
  new ResizeObserver(placeBelowHeader).observe(transcript);
  window.addEventListener("resize", placeBelowHeader);
}

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
  placeBelowHeader();
  watchHeader();
  root().append(box);
  while (root().childElementCount > MAX_TOASTS) root().firstElementChild.remove();
  if (timeout) timer = setTimeout(dismiss, timeout);
  return dismiss;
}

export function toastError(err) {
  return toast(err && err.message ? err.message : String(err), { kind: "error", timeout: 8000 });
}

// A small modal question with a few answers (confirmations, "replace or branch"), on <dialog>.

import { el } from "./dom.js";

// Resolves to the chosen button's value, or null when dismissed (Escape, Cancel).
export function ask({ title, message, body, buttons = [], cancelLabel = "Cancel" }) {
  return new Promise((resolve) => {
    const dialog = el("dialog", "modal");
    dialog.setAttribute("aria-labelledby", "modal-title");
    dialog.append(el("h2", "modal-title", title));
    dialog.querySelector(".modal-title").id = "modal-title";
    if (message) dialog.append(el("p", "modal-message", message));
    if (body) dialog.append(body);
    const row = el("div", "modal-buttons");
    let value = null;
    const choose = (chosen) => {
      value = chosen;
      dialog.close();
    };
    const cancel = el("button", "btn", cancelLabel);
    cancel.type = "button";
    cancel.addEventListener("click", () => choose(null));
    row.append(cancel);
    for (const { label, value: chosen, kind } of buttons) {
      const button = el("button", `btn ${kind === "danger" ? "btn-danger" : "btn-primary"}`, label);
      button.type = "button";
      button.dataset.value = chosen;
      button.addEventListener("click", () => choose(chosen));
      row.append(button);
    }
    dialog.append(row);
    dialog.addEventListener("close", () => {
      dialog.remove();
      resolve(value);
    });
    document.body.append(dialog);
    dialog.showModal();
    row.lastElementChild.focus();
  });
}

export async function confirmAction({ title, message, confirmLabel, danger = true }) {
  const answer = await ask({ title, message, buttons: [{ label: confirmLabel, value: "yes", kind: danger ? "danger" : "primary" }] });
  return answer === "yes";
}

// A sidebar row's title edited in place: the row's open button becomes a text field; Enter or leaving the
// field saves, Escape cancels. `onDone(title)` hears the trimmed new title, or null when nothing is to be
// saved (cancelled, empty or unchanged).

import { el } from "./dom.js";

export function editTitleInRow(node, currentTitle, onDone) {
  const form = el("form", "rename-form");
  const input = el("input", "rename-input");
  input.value = currentTitle || "";
  input.maxLength = 200;
  input.setAttribute("aria-label", "New title");
  form.append(input);
  node.draggable = false; // a drag in the field selects its text
  node.querySelector(".session-open").replaceWith(form);
  input.focus();
  input.select();
  let finished = false;
  const finish = (save) => {
    if (finished) return;
    finished = true;
    const title = input.value.trim();
    onDone(save && title && title !== currentTitle ? title : null);
  };
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    finish(true);
  });
  input.addEventListener("keydown", (event) => {
    if (event.key === "Escape") {
      event.stopPropagation();
      finish(false);
    }
  });
  input.addEventListener("blur", () => finish(true));
}

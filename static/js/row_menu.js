// The "⋯" menu of a sidebar row (a session, a project): a toggle button and its menu of actions, moved
// through with the arrow keys, closed with Escape (focus back on the toggle) or by choosing.

import { el } from "./dom.js";

// Every open row menu under `root` closed.
export function closeMenus(root) {
  for (const menu of root.querySelectorAll(".session-menu")) menu.hidden = true;
  for (const toggle of root.querySelectorAll(".session-menu-btn")) toggle.setAttribute("aria-expanded", "false");
}

// `entries`: [label, handler] pairs; `closeAll()` closes every menu of the list before one opens.
export function rowMenu(boxClass, ariaLabel, entries, closeAll) {
  const box = el("div", boxClass);
  const toggle = el("button", "icon-btn session-menu-btn", "⋯");
  toggle.type = "button";
  toggle.setAttribute("aria-label", ariaLabel);
  toggle.setAttribute("aria-haspopup", "menu");
  toggle.setAttribute("aria-expanded", "false");
  const menu = el("div", "session-menu");
  menu.setAttribute("role", "menu");
  menu.hidden = true;
  for (const [label, handler] of entries) {
    const button = el("button", "menu-item", label);
    button.type = "button";
    button.setAttribute("role", "menuitem");
    button.addEventListener("click", () => {
      closeAll();
      handler();
    });
    menu.append(button);
  }
  toggle.addEventListener("click", () => {
    const opening = menu.hidden;
    closeAll();
    menu.hidden = !opening;
    toggle.setAttribute("aria-expanded", String(opening));
    if (opening) menu.querySelector("button").focus();
  });
  menu.addEventListener("keydown", (event) => {
    const items = [...menu.querySelectorAll(".menu-item")];
    const at = items.indexOf(document.activeElement);
    if (event.key === "Escape") {
      event.stopPropagation();
      closeAll();
      toggle.focus();
    } else if (event.key === "ArrowDown" || event.key === "ArrowUp") {
      event.preventDefault();
      const step = event.key === "ArrowDown" ? 1 : -1;
      items[(at + step + items.length) % items.length].focus();
    }
  });
  box.append(toggle, menu);
  return box;
}

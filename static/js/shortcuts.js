// The keyboard shortcuts, listed by `?`.

import { COMMANDS } from "./commands.js";
import { ask } from "./dialog.js";
import { el } from "./render.js";

export const SHORTCUTS = [
  ["Enter", "Send the message"],
  ["Shift + Enter", "New line in the message"],
  ["Esc", "Stop the answer being streamed; cancel an edit"],
  ["Alt + Shift + N", "New session"],
  ["Ctrl + K", "Search sessions"],
  ["/", "Search sessions (outside the message box)"],
  ["/ in the message box", `Slash commands: ${COMMANDS.map((c) => `/${c.name}`).join(", ")}`],
  ["?", "This list"],
];

export function showShortcuts() {
  const table = el("table", "shortcuts");
  for (const [keys, what] of SHORTCUTS) {
    const row = el("tr");
    const key = el("td", "shortcut-keys");
    key.append(el("kbd", null, keys));
    row.append(key, el("td", "shortcut-what", what));
    table.append(row);
  }
  return ask({ title: "Keyboard shortcuts", body: table, cancelLabel: "Close" });
}

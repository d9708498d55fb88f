// The keyboard shortcuts, listed by `?`; the slash commands, listed by `/help`.

import { COMMANDS } from "./commands.js";
import { ask } from "./dialog.js";
import { el } from "./dom.js";

export const SHORTCUTS = [
  ["Enter", "Send the message"],
  ["Shift + Enter", "New line in the message"],
  ["Esc", "Stop the answer being streamed; cancel an edit"],
  ["Alt + Shift + N", "New session"],
  ["Ctrl + K", "Search sessions"],
  ["/", "Search sessions (outside the message box)"],
  ["/ in the message box", "Slash commands (/help lists them)"],
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

export function showCommands() {
  const table = el("table", "shortcuts");
  for (const command of COMMANDS) {
    const row = el("tr");
    const name = el("td", "shortcut-keys");
    name.append(el("kbd", null, `/${command.name}${command.args ? ` ${command.args}` : ""}`));
    const kind = command.kind === "skill" ? " (skill)" : "";
    row.append(name, el("td", "shortcut-what", `${command.help}${kind}`));
    table.append(row);
  }
  return ask({ title: "Slash commands", body: table, cancelLabel: "Close" });
}

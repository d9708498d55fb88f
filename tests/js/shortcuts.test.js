// The shortcuts list names the slash commands from the composer's one table.
import assert from "node:assert/strict";
import { test } from "node:test";

import { COMMANDS } from "../../static/js/commands.js";
import { SHORTCUTS } from "../../static/js/shortcuts.js";

test("the slash-command line lists every command of the table", () => {
  const line = SHORTCUTS.find(([keys]) => keys === "/ in the message box")[1];
  for (const command of COMMANDS) assert.ok(line.includes(`/${command.name}`), command.name);
});

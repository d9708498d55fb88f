// The shortcuts list points to /help, which lists the slash commands from the composer's one table.
import assert from "node:assert/strict";
import { test } from "node:test";

import { addAgentCommands, findCommand } from "../../static/js/commands.js";
import { SHORTCUTS } from "../../static/js/shortcuts.js";

test("the slash-command line points to /help, the agent's command that lists them", () => {
  const line = SHORTCUTS.find(([keys]) => keys === "/ in the message box")[1];
  assert.ok(line.includes("/help"));
  addAgentCommands([{ name: "help", args: "", help: "Show available commands", kind: "agent" }]);
  assert.equal(findCommand("help").kind, "agent");
});

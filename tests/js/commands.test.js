// The slash commands' pure parts: one table (name, hint, help, handler) that parsing, completion and the
// checks before a command runs all read.
import assert from "node:assert/strict";
import { test } from "node:test";

import { addAgentCommands, COMMANDS, completions, findCommand, parseSlash, refusal } from "../../static/js/commands.js";

test("a known slash command parses with its argument", () => {
  assert.deepEqual(parseSlash("/compress  the plan "), { name: "compress", arg: "the plan" });
  assert.deepEqual(parseSlash("/UNDO"), { name: "undo", arg: "" });
});

test("an unknown /word is marked unknown, so it is not sent to the model by accident", () => {
  assert.deepEqual(parseSlash("/launch rockets"), { name: "launch", arg: "rockets", unknown: true });
  assert.equal(findCommand("launch"), null);
});

test("plain text, a bare slash and a path are not commands", () => {
  assert.equal(parseSlash("compress this"), null);
  assert.equal(parseSlash("/"), null);
  assert.equal(parseSlash("/usr/bin/env is missing"), null);
});

test("the agent's commands and skills join the table after the page's own, which win a clash", () => {
  addAgentCommands([
    { name: "model", args: "[model]", help: "Switch model", kind: "agent" },
    { name: "gif-search", args: "[instruction]", help: "Find a GIF", kind: "skill" },
    { name: "undo", args: "", help: "the agent's undo", kind: "agent" },
    { name: "quit", args: "", help: "not run by the page", kind: "agent" },
  ]);
  assert.equal(findCommand("model").kind, "agent");
  assert.deepEqual(parseSlash("/gif-search happy cats"), { name: "gif-search", arg: "happy cats" });
  assert.equal(findCommand("undo").help, "Remove the last exchange");
  assert.equal(findCommand("quit"), null);
  addAgentCommands([]); // a reload replaces them
  assert.equal(findCommand("gif-search"), null);
});

test("every command in the table has its help and handler, parses and completes from its first letter", () => {
  assert.deepEqual(
    COMMANDS.map((c) => c.name),
    ["compress", "uncompress", "undo", "retry", "clear", "title"],
  );
  for (const command of COMMANDS) {
    assert.equal(typeof command.run, "function", command.name);
    assert.ok(command.help, command.name);
    assert.equal(findCommand(command.name), command);
    assert.equal(parseSlash(`/${command.name}`).name, command.name);
    assert.ok(completions(`/${command.name[0]}`).includes(command));
  }
  assert.deepEqual(completions("/zz"), []);
  assert.deepEqual(completions("no slash"), []);
});

test("only /title runs with no session open, and no command runs while an answer streams", () => {
  const open = { sessionId: "s1", streaming: false };
  for (const command of COMMANDS) {
    assert.equal(refusal(command, open), null, command.name);
    assert.match(refusal(command, { sessionId: "s1", streaming: true }), /Wait for the answer/);
    const alone = refusal(command, { sessionId: null, streaming: false });
    if (command.name === "title") assert.equal(alone, null);
    else assert.equal(alone, "Open a session first.", command.name);
  }
  assert.ok(refusal(null, open));
});

test("the agent's /goal runs while a goal turn streams (to pause it), with a session open", () => {
  addAgentCommands([{ name: "goal", args: "[text]", help: "Set a standing goal", kind: "agent" }]);
  const goal = findCommand("goal");
  assert.equal(goal.kind, "agent");
  assert.equal(refusal(goal, { sessionId: "s1", streaming: true }), null);
  assert.equal(refusal(goal, { sessionId: null, streaming: false }), "Open a session first.");
  addAgentCommands([]);
});

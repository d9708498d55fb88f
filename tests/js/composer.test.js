// The composer's pure parts: slash commands come from the one COMMANDS table.
import assert from "node:assert/strict";
import { test } from "node:test";

import { COMMANDS, completions, parseSlash } from "../../static/js/composer.js";

test("a known slash command parses with its argument", () => {
  assert.deepEqual(parseSlash("/compress  the plan "), { name: "compress", arg: "the plan" });
  assert.deepEqual(parseSlash("/UNDO"), { name: "undo", arg: "" });
});

test("an unknown command or plain text is not a command", () => {
  assert.equal(parseSlash("/launch rockets"), null);
  assert.equal(parseSlash("compress this"), null);
  assert.equal(parseSlash("/"), null);
});

test("every command in the table parses and completes from its first letter", () => {
  for (const command of COMMANDS) {
    assert.equal(parseSlash(`/${command.name}`).name, command.name);
    assert.ok(completions(`/${command.name[0]}`).includes(command));
  }
  assert.deepEqual(completions("/zz"), []);
  assert.deepEqual(completions("no slash"), []);
});

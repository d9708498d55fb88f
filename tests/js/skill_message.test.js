// A skill's slash-command message reads as the skill's name and the person's instruction.
import assert from "node:assert/strict";
import { test } from "node:test";

import { skillInvocation } from "../../static/js/skill_message.js";

const SENT =
  '[IMPORTANT: The user has invoked the "greet" skill, indicating they want you to follow its instructions. ' +
  "The full skill content is loaded below.]\n\n# Greet\nSay hello.\n\n" +
  "The user has provided the following instruction alongside the skill invocation: say hi to Bob" +
  "\n\n[Runtime note: something for the model]";

test("the skill and the instruction are read from the agent's message", () => {
  assert.deepEqual(skillInvocation(SENT), { skill: "greet", instruction: "say hi to Bob" });
});

test("a bare invocation has no instruction, and other text is not an invocation", () => {
  assert.deepEqual(skillInvocation(SENT.slice(0, SENT.indexOf("The user has provided"))), { skill: "greet", instruction: "" });
  assert.equal(skillInvocation("hello"), null);
  assert.equal(skillInvocation(null), null);
});

// The reasoning picker's options: the default names what it resolves to, "none" reads as off.
import assert from "node:assert/strict";
import { test } from "node:test";

import { reasoningOptions } from "../../static/js/reasoning_picker.js";

test("the default names the configured effort and none reads as off", () => {
  assert.deepEqual(reasoningOptions({ default: "low", levels: ["none", "low", "high"] }), [
    ["", "Reasoning: default (low)"],
    ["none", "Reasoning: off"],
    ["low", "Reasoning: low"],
    ["high", "Reasoning: high"],
  ]);
  assert.equal(reasoningOptions({ default: null, levels: [] })[0][1], "Reasoning: default");
});

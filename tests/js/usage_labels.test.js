// The usage labels: short counts, a cost where the agent knows the price, nothing where it reported none.
import assert from "node:assert/strict";
import { test } from "node:test";

import { compactCount, costLabel, usageLabel, usageTitle } from "../../static/js/usage_labels.js";

test("counts are short and costs have the digits that matter", () => {
  assert.deepEqual([0, 999, 1234, 12_345, 2_500_000].map(compactCount), ["0", "999", "1.2k", "12k", "2.5M"]);
  assert.deepEqual([0, 0.00123, 1.5].map(costLabel), ["", "$0.0012", "$1.50"]);
});

test("an answer's label shows tokens in and out and the cost", () => {
  assert.equal(usageLabel({ input_tokens: 1234, output_tokens: 56, estimated_cost_usd: 0.0012 }), "↑1.2k ↓56 · $0.0012");
  assert.equal(usageLabel({ input_tokens: 10, output_tokens: 2 }), "↑10 ↓2");
  assert.equal(usageLabel(null), "");
  assert.equal(usageTitle({ input_tokens: 1234, output_tokens: 56 }), "1,234 tokens in\n56 tokens out");
});

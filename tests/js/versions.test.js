// "‹ 1/2 ›": which version a step asks for.
import assert from "node:assert/strict";
import { test } from "node:test";

import { steppedVersion } from "../../static/js/versions.js";

const GROUPS = [{ index: 2, count: 3, current: 1 }];

test("a step goes to the neighbouring version of the message's group", () => {
  assert.equal(steppedVersion(GROUPS, 2, -1), 0);
  assert.equal(steppedVersion(GROUPS, 2, 1), 2);
});

test("no step past either end, and none on a message without versions", () => {
  assert.equal(steppedVersion([{ index: 2, count: 2, current: 0 }], 2, -1), null);
  assert.equal(steppedVersion([{ index: 2, count: 2, current: 1 }], 2, 1), null);
  assert.equal(steppedVersion(GROUPS, 4, 1), null);
  assert.equal(steppedVersion(undefined, 2, 1), null);
});

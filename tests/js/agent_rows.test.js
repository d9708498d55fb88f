// The sidebar's source filter of the agent's own conversations: which sources show.
import assert from "node:assert/strict";
import { test } from "node:test";

import { isShown, sourcesIn } from "../../static/js/agent_rows.js";

test("cron and webhook runs are hidden until chosen, every other source is shown", () => {
  assert.equal(isShown("cli", {}), true);
  assert.equal(isShown("telegram", {}), true);
  assert.equal(isShown("cron", {}), false);
  assert.equal(isShown("webhook", {}), false);
  assert.equal(isShown("subagent", {}), false);
  assert.equal(isShown("cron", { cron: true }), true);
  assert.equal(isShown("cli", { cli: false }), false);
});

test("the sources offered are those of the rows, in order, once each; a row without one is 'other'", () => {
  assert.deepEqual(sourcesIn([{ source: "cli" }, { source: "cron" }, { source: "cli" }, {}]), ["cli", "cron", "other"]);
});

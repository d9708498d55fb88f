// The human views' pure parts: what a call of the agent's memory tool says in the transcript.
import assert from "node:assert/strict";
import { test } from "node:test";

import { memoryNote } from "../../static/js/toolviews.js";

test("a memory change names the file and what was done", () => {
  assert.deepEqual(memoryNote({ action: "add", target: "user", content: "likes tea" }, { success: true }), {
    kind: "changed",
    text: "Memory changed: added to USER.md",
  });
  assert.equal(memoryNote({ action: "remove", target: "memory" }, { success: true }).text, "Memory changed: removed from MEMORY.md");
});

test("a refused memory change says so, and a running one says it is under way", () => {
  const refused = memoryNote({ action: "add" }, { success: false, error: "Memory at 2,200/2,200 chars." });
  assert.deepEqual(refused, { kind: "failed", text: "Memory not changed: Memory at 2,200/2,200 chars." });
  assert.equal(memoryNote({ action: "replace", target: "memory" }, null).kind, "running");
});

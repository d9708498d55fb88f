// The sidebar's bulk actions: shift-click ranges, toast words, and the undo of each action.
import assert from "node:assert/strict";
import { test } from "node:test";

import { rangeIds, summary, undoRequests } from "../../static/js/bulk_rules.js";

test("a shift-click selects every row shown between the anchor and the row, either way", () => {
  const ids = ["a", "b", "c", "d", "e"];
  assert.deepEqual(rangeIds(ids, "b", "d"), ["b", "c", "d"]);
  assert.deepEqual(rangeIds(ids, "d", "b"), ["b", "c", "d"]);
  assert.deepEqual(rangeIds(ids, "gone", "c"), ["c"]);
});

test("the toast names what was done, the project moved to, and what failed", () => {
  assert.equal(summary("delete", { done: 12, failed: 0 }), "Deleted 12 sessions");
  assert.equal(summary("move", { done: 1, failed: 0 }, "Research"), "Moved 1 session to Research");
  assert.equal(summary("move", { done: 2, failed: 1 }, null), "Moved 2 sessions out of their project · 1 could not be changed");
});

test("an undo puts back only what changed: deletes restored by token, moves back to each previous project", () => {
  const deleted = [{ session_id: "a", ok: true, undo_token: "a-1" }, { session_id: "b", ok: false }];
  assert.deepEqual(undoRequests("delete", deleted), [{ action: "restore", undo_tokens: ["a-1"] }]);
  assert.deepEqual(undoRequests("archive", [{ session_id: "a", ok: true }]), [{ action: "unarchive", session_ids: ["a"] }]);
  const moved = [
    { session_id: "a", ok: true, previous_project_id: null },
    { session_id: "b", ok: true, previous_project_id: "p1" },
    { session_id: "c", ok: true, previous_project_id: null },
  ];
  assert.deepEqual(undoRequests("move", moved), [
    { action: "move", session_ids: ["a", "c"], project_id: null },
    { action: "move", session_ids: ["b"], project_id: "p1" },
  ]);
  assert.deepEqual(undoRequests("delete", [{ session_id: "a", ok: false }]), []);
});

import assert from "node:assert/strict";
import { test } from "node:test";

import { diffKind, sideBySideRows } from "../../static/js/diff_view.js";

test("each line of a unified diff is told apart", () => {
  const lines = ["diff --git a/x b/x", "--- a/x", "+++ b/x", "@@ -1 +1 @@", "-old", "+new", " same"];
  assert.deepEqual(lines.map(diffKind), ["meta", "meta", "meta", "hunk", "del", "add", "ctx"]);
});

test("side by side pairs removed with added lines, numbers each side and leaves headers out", () => {
  const text = [
    "diff --git a/notes.txt b/notes.txt",
    "new file mode 100644",
    "--- a/notes.txt",
    "+++ b/notes.txt",
    "@@ -3,3 +3,4 @@ intro",
    " keep",
    "-old one",
    "--- a line that starts with dashes",
    "+new one",
    "+added",
    "+more",
    "\\ No newline at end of file",
    "",
  ].join("\n");
  const rows = sideBySideRows(text);
  assert.deepEqual(rows[0], { hunk: "@@ -3,3 +3,4 @@ intro" });
  assert.deepEqual(rows[1], { left: { n: 3, text: "keep", kind: "ctx" }, right: { n: 3, text: "keep", kind: "ctx" } });
  assert.deepEqual(rows[2], { left: { n: 4, text: "old one", kind: "del" }, right: { n: 4, text: "new one", kind: "add" } });
  assert.deepEqual(rows[3].left, { n: 5, text: "-- a line that starts with dashes", kind: "del" });
  assert.deepEqual(rows[4], { left: null, right: { n: 6, text: "more", kind: "add" } });
  assert.equal(rows.length, 5);
});

// The files panel's pure parts: sizes and paths.
import assert from "node:assert/strict";
import { test } from "node:test";

import { joinPath, parentOf, sizeLabel } from "../../static/js/files_panel.js";

test("sizes read as bytes, KB or MB", () => {
  assert.deepEqual([0, 1023, 1536, 5 * 1024 * 1024].map(sizeLabel), ["0 B", "1023 B", "1.5 KB", "5.0 MB"]);
});

test("a path's folder and a child's path, the workspace's root being empty", () => {
  assert.equal(parentOf("src/app/main.py"), "src/app");
  assert.equal(parentOf("README.md"), "");
  assert.equal(joinPath("", "a.txt"), "a.txt");
  assert.equal(joinPath("src", "a.txt"), "src/a.txt");
});

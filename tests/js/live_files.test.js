import assert from "node:assert/strict";
import { test } from "node:test";

import { LiveFiles, workspacePath } from "../../static/js/live_files.js";

test("a tool's path is named relative to the workspace, and one outside it is not the panel's", () => {
  assert.equal(workspacePath("notes/todo.txt", "/w/space"), "notes/todo.txt");
  assert.equal(workspacePath("./a//b.txt", "/w/space"), "a/b.txt");
  assert.equal(workspacePath("/w/space/src/x.py", "/w/space/"), "src/x.py");
  assert.equal(workspacePath("/w/spaceship/x.py", "/w/space"), null);
  assert.equal(workspacePath("../x.py", "/w/space"), null);
  assert.equal(workspacePath("/etc/passwd", null), null);
  assert.equal(workspacePath("", "/w/space"), null);
});

test("a write or patch that completed names its file; a failed one or another tool does not", () => {
  const written = [];
  const live = new LiveFiles((path) => written.push(path));
  live.event("tool", { id: "1", name: "write_file", args: { path: "a.txt" } }, "/w");
  live.event("tool", { id: "2", name: "patch", args: { path: "/w/b.txt" } }, "/w");
  live.event("tool", { id: "3", name: "terminal", args: { command: "ls" } }, "/w");
  live.event("tool", { id: "4", name: "write_file", args: { path: "c.txt" } }, "/w");
  live.event("tool_complete", { id: "1", name: "write_file", is_error: false }, "/w");
  live.event("tool_complete", { id: "2", name: "patch", is_error: false }, "/w");
  live.event("tool_complete", { id: "3", name: "terminal", is_error: false }, "/w");
  live.event("tool_complete", { id: "4", name: "write_file", is_error: true }, "/w");
  assert.deepEqual(written, ["a.txt", "b.txt"]);
});

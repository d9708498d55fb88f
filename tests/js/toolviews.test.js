// What a collapsed tool card says about its call, a clarify exchange read back from the transcript, and what a
// call of the agent's memory tool says.
import assert from "node:assert/strict";
import { test } from "node:test";

import { clarifyExchange, memoryNote, toolBrief } from "../../static/js/toolviews.js";

test("a collapsed card names the command, the file or the query of its call", () => {
  assert.equal(toolBrief("terminal", '{"command": "ls -1 src", "timeout": 30}'), "ls -1 src");
  assert.equal(toolBrief("patch", { mode: "replace", path: "src/app.py", old_string: "x" }), "src/app.py");
  assert.equal(toolBrief("read_file", '{"file_path": "notes.md"}'), "notes.md");
  assert.equal(toolBrief("web_search", '{"query": "hermes agent"}'), "hermes agent");
  assert.equal(toolBrief("todo", { todos: [{}, {}] }), "2 items");
});

test("the line is one line, shortened, and empty when the arguments say nothing short", () => {
  assert.equal(toolBrief("terminal", { command: "echo a\n  && echo b" }), "echo a && echo b");
  const long = toolBrief("terminal", { command: "x".repeat(500) });
  assert.equal(long.length, 120);
  assert.ok(long.endsWith("…"));
  assert.equal(toolBrief("tool", null), "");
  assert.equal(toolBrief("tool", "not json"), "");
  assert.equal(toolBrief("tool", { count: [1, 2] }), "");
});

test("a clarify exchange has its question, its choices and the answer given", () => {
  const result = { question: "Which colour?", choices_offered: ["red", "blue"], user_response: "blue" };
  assert.deepEqual(clarifyExchange({ question: "Which colour?", choices: ["red", "blue"] }, result), {
    question: "Which colour?",
    choices: ["red", "blue"],
    answer: "blue",
    unanswered: false,
    waiting: false,
  });
});

test("a clarify nobody answered says so instead of showing the agent's note as an answer", () => {
  const note = "[The person did not answer this question (nobody answered within 120 s). Do not assume an answer.]";
  const exchange = clarifyExchange({ question: "Go on?" }, { question: "Go on?", choices_offered: null, user_response: note });
  assert.equal(exchange.answer, null);
  assert.equal(exchange.unanswered, true);
  assert.deepEqual(exchange.choices, []);
  assert.equal(clarifyExchange({ question: "Still waiting?" }, null).waiting, true);
});

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

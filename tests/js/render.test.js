// The transcript's readers of a message: its text and its time.
import assert from "node:assert/strict";
import { test } from "node:test";

import { isCompactionText, messageText, messageTimestamp } from "../../static/js/render.js";

test("message text is the string content or the text parts joined", () => {
  assert.equal(messageText({ content: "plain" }), "plain");
  assert.equal(messageText({ content: [{ type: "text", text: "a" }, "b", { type: "image_url" }] }), "a\n\nb");
  assert.equal(messageText({ content: 7 }), "");
  assert.equal(messageText(null), "");
});

test("a message's time is its timestamp, else _ts; nothing for missing or bad values", () => {
  assert.equal(messageTimestamp({ timestamp: 5, _ts: 9 }), 5);
  assert.equal(messageTimestamp({ _ts: "9" }), 9);
  assert.equal(messageTimestamp({ timestamp: "", _ts: null }), null);
  assert.equal(messageTimestamp({ timestamp: "soon" }), null);
});

test("compaction texts are known by their opening words", () => {
  assert.ok(isCompactionText("  [CONTEXT COMPACTION — REFERENCE ONLY] earlier turns"));
  assert.ok(!isCompactionText("context compaction is a topic"));
});

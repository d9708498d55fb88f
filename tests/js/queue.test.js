// Which way a message sent while a turn runs goes, by the keys that sent it.
import assert from "node:assert/strict";
import { test } from "node:test";

import { sendMode } from "../../static/js/queue.js";

test("Enter queues, Ctrl or Cmd with Enter steers, Alt with Enter interrupts", () => {
  assert.equal(sendMode({ key: "Enter" }), "queue");
  assert.equal(sendMode({ key: "Enter", ctrlKey: true }), "steer");
  assert.equal(sendMode({ key: "Enter", metaKey: true }), "steer");
  assert.equal(sendMode({ key: "Enter", altKey: true }), "interrupt");
  assert.equal(sendMode({ key: "Enter", altKey: true, ctrlKey: true }), "interrupt");
  assert.equal(sendMode(undefined), "queue");
});

// Which turn events notify, and the memory that keeps every tab of a browser to one notification each.
import assert from "node:assert/strict";
import { test } from "node:test";

import { SeenTags, mayNotify, noticeFor } from "../../static/js/notify_rules.js";

const ctx = { sessionId: "s1", streamId: "st9", title: "Plan the trip" };

test("a finished turn, an approval and a clarify question each make a notice tagged by their own id", () => {
  const done = noticeFor("done", {}, ctx);
  assert.equal(done.tag, "talaria:done:s1:st9");
  assert.equal(done.body, "Plan the trip");
  assert.equal(done.sessionId, "s1");
  assert.equal(noticeFor("approval", { approval_id: "a1" }, ctx).tag, "talaria:approval:s1:a1");
  assert.equal(noticeFor("clarify", { clarify_id: "c1" }, ctx).title, "Hermes has a question");
});

test("streaming events, resolved questions and events without an id notify nothing", () => {
  for (const name of ["token", "render", "tool", "tool_complete", "approval_resolved", "clarify_resolved", "error"]) {
    assert.equal(noticeFor(name, { approval_id: "a1", clarify_id: "c1" }, ctx), null, name);
  }
  assert.equal(noticeFor("approval", {}, ctx), null);
  assert.equal(noticeFor("done", {}, { ...ctx, streamId: null }), null);
  assert.equal(noticeFor("done", {}, { ...ctx, sessionId: "" }), null);
});

test("the same turn seen from its stream and from the sidebar feed has one tag", () => {
  const fromStream = noticeFor("done", { session: {} }, ctx);
  const fromFeed = noticeFor("done", {}, { sessionId: "s1", streamId: "st9", title: "other title" });
  assert.equal(fromStream.tag, fromFeed.tag);
});

test("only a hidden tab with permission granted and notifications switched on notifies", () => {
  assert.equal(mayNotify({ permission: "granted", enabled: true, visibility: "hidden" }), true);
  assert.equal(mayNotify({ permission: "granted", enabled: true, visibility: "visible" }), false);
  assert.equal(mayNotify({ permission: "granted", enabled: false, visibility: "hidden" }), false);
  assert.equal(mayNotify({ permission: "default", enabled: true, visibility: "hidden" }), false);
  assert.equal(mayNotify({ permission: "denied", enabled: true, visibility: "hidden" }), false);
});

test("a tag is shown once, and the oldest tags are forgotten past the limit", () => {
  const seen = new SeenTags(2);
  assert.equal(seen.add("a"), true);
  assert.equal(seen.add("a"), false);
  seen.add("b");
  seen.add("c");
  assert.equal(seen.has("a"), false);
  assert.equal(seen.has("b"), true);
  assert.equal(seen.has("c"), true);
});

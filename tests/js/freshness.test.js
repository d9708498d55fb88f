// Which copy of a sidebar row the page keeps when answers and feed changes arrive in any order.
import assert from "node:assert/strict";
import { test } from "node:test";

import { READ_AT, chooseRow, followRow, isNewerThan, mergePage, readPosition, stampRead } from "../../static/js/freshness.js";

const row = (sid, title, seq) => ({ session_id: sid, title, _seq: seq });

test("an answer read before a change the feed brought does not replace the row", () => {
  // The session was opened at feed position 10; the rename arrived as change 11; then the answer landed.
  const renamed = row("a", "Renamed", 11);
  assert.equal(chooseRow(renamed, { session_id: "a", title: "Untitled" }, 10), renamed);
});

test("a copy at least as new as the row replaces its fields and keeps the others", () => {
  const known = { ...row("a", "Old", 10), pinned: true };
  assert.deepEqual(chooseRow(known, { session_id: "a", title: "New" }, 10), { ...known, title: "New", _seq: 10 });
  assert.deepEqual(chooseRow(known, { session_id: "a", title: "Newer" }, 12), { ...known, title: "Newer", _seq: 12 });
});

test("a copy of unknown age never replaces a row but may add one", () => {
  const known = row("a", "Renamed", 3);
  assert.equal(chooseRow(known, { session_id: "a", title: "Untitled" }, null), known);
  assert.deepEqual(chooseRow(undefined, { session_id: "b", title: "B" }, null), row("b", "B", Number.NEGATIVE_INFINITY));
});

test("a session the feed removed comes back only with a copy read after the removal", () => {
  const copy = { session_id: "a", title: "A" };
  assert.equal(chooseRow(undefined, copy, 6, 7), null);
  assert.equal(chooseRow(undefined, copy, null, 7), null);
  assert.deepEqual(chooseRow(undefined, copy, 7, 7), row("a", "A", 7)); // an undo read after it
});

test("the mark of when a copy was requested does not stay on the row", () => {
  const kept = chooseRow(undefined, { session_id: "a", title: "A", [READ_AT]: 4 }, 4);
  assert.equal(READ_AT in kept, false);
});

test("answers are marked with the feed position their request started at", () => {
  const data = stampRead({ session: { session_id: "a" } }, 42);
  assert.equal(readPosition(data.session), 42);
  assert.deepEqual(stampRead({ sessions: [] }, 42), { sessions: [] });
  assert.equal(readPosition({ session_id: "a" }), null);
  assert.equal(readPosition(null), null);
});

test("the row wins over an answer older than it, and not over one as new", () => {
  const known = row("a", "Renamed", 11);
  assert.equal(isNewerThan(known, { session_id: "a", [READ_AT]: 10 }), true);
  assert.equal(isNewerThan(known, { session_id: "a", [READ_AT]: 11 }), false);
  assert.equal(isNewerThan(known, { session_id: "a" }), true);
  assert.equal(isNewerThan(undefined, { session_id: "a" }), false);
});

test("a page read while the feed runs keeps what the feed brought after it", () => {
  const rows = [row("renamed", "New title", 21), row("created", "Made later", 22), row("stale", "Gone", 15)];
  const page = [
    { session_id: "renamed", title: "Old title" },
    { session_id: "kept", title: "Kept" },
    { session_id: "deleted", title: "Deleted" },
  ];
  const merged = mergePage(rows, page, 20, new Map([["deleted", 21]]));
  assert.deepEqual(
    merged.map((r) => [r.session_id, r.title, r._seq]),
    [
      ["renamed", "New title", 21],
      ["kept", "Kept", 20],
      ["created", "Made later", 22],
    ],
  );
});

test("the header shows the row's model, workspace, pin and archive when the row is newer than the session", () => {
  const session = { session_id: "a", title: "A", model: "old", model_provider: "p1", workspace: "/w1", messages_total: 3, [READ_AT]: 10 };
  const newer = { ...row("a", "A", 11), model: "new", model_provider: "p2", workspace: "/w2", pinned: true, archived: true, message_count: 9 };
  assert.deepEqual(followRow(session, newer), {
    ...session,
    model: "new",
    model_provider: "p2",
    workspace: "/w2",
    pinned: true,
    archived: true,
  });
});

test("an older or equally new row leaves the session's header as it is", () => {
  const session = { session_id: "a", title: "Mine", model: "picked", [READ_AT]: 11 };
  assert.equal(followRow(session, { ...row("a", "Theirs", 10), model: "stale" }), session);
  assert.equal(followRow(session, { ...row("a", "Theirs", 11), model: "stale" }), session);
});

test("a row that agrees with the session changes nothing, and no row or session is no change", () => {
  const session = { session_id: "a", title: "A", model: "m", [READ_AT]: 1 };
  assert.equal(followRow(session, { ...row("a", "A", 5), model: "m" }), session);
  assert.equal(followRow(session, undefined), session);
  assert.equal(followRow(null, row("a", "A", 5)), null);
});

test("a field the row does not carry is not cleared in the header", () => {
  const session = { session_id: "a", title: "A", model: "m", model_provider: "p", [READ_AT]: 1 };
  assert.deepEqual(followRow(session, { ...row("a", "A", 5), model: "n" }), { ...session, model: "n" });
});

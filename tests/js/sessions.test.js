// The sidebar's search snippets: the query's occurrences marked, everything else plain text.
import assert from "node:assert/strict";
import { test } from "node:test";

import { indexNote, markedPieces, markMatches } from "../../static/js/sessions.js";

test("every occurrence of the query is marked, whatever its case", () => {
  assert.deepEqual(markMatches("Quick brown fox, quick!", "quick"), [
    { text: "Quick", mark: true },
    { text: " brown fox, ", mark: false },
    { text: "quick", mark: true },
    { text: "!", mark: false },
  ]);
});

test("a query of several words matches them as the server does, spaces collapsed", () => {
  assert.deepEqual(markMatches("the big dog", "BIG dog"), [{ text: "the ", mark: false }, { text: "big dog", mark: true }]);
});

test("markup in a snippet stays text, and no query marks nothing", () => {
  assert.deepEqual(markMatches("<b>x</b> & y", "x"), [
    { text: "<b>", mark: false },
    { text: "x", mark: true },
    { text: "</b> & y", mark: false },
  ]);
  assert.deepEqual(markMatches("plain", ""), [{ text: "plain", mark: false }]);
  assert.deepEqual(markMatches("", "x"), []);
});

test("the server's marked snippet becomes text pieces, its escapes decoded and nothing read as HTML", () => {
  assert.deepEqual(markedPieces("a &lt;b&gt; <mark>fox</mark> &amp; <mark>Fox&#x27;s</mark>&quot;"), [
    { text: "a <b> ", mark: false },
    { text: "fox", mark: true },
    { text: " & ", mark: false },
    { text: "Fox's", mark: true },
    { text: '"', mark: false },
  ]);
  assert.deepEqual(markedPieces("&lt;mark&gt;not a mark&lt;/mark&gt;"), [{ text: "<mark>not a mark</mark>", mark: false }]);
  assert.deepEqual(markedPieces(""), []);
});

test("a rebuilding index is said with its progress; a ready one says nothing", () => {
  assert.equal(indexNote({ state: "rebuilding", progress: 0.427 }), "Search index rebuilding (42%): results may be incomplete.");
  assert.equal(indexNote({ state: "ready", progress: 1 }), "");
  assert.equal(indexNote(undefined), "");
});

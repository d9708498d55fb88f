// The sidebar's search snippets: the query's occurrences marked, everything else plain text.
import assert from "node:assert/strict";
import { test } from "node:test";

import { markMatches } from "../../static/js/sessions.js";

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

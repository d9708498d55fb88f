// The compression marker's numbers and the context meter's labels.
import assert from "node:assert/strict";
import { test } from "node:test";

import { anchorMessageIdx, formatTokens, tokensSaved } from "../../static/js/markers.js";

test("tokens saved come from the anchor details, else from the summary's token line", () => {
  assert.equal(tokensSaved({ compression_anchor_details: { tokens_before: 12000, tokens_after: 2000 } }), 10000);
  assert.equal(tokensSaved({ compression_anchor_summary: "Compressed: ~12,345 → ~2,000 tokens" }), 10345);
  assert.equal(tokensSaved({ compression_anchor_summary: "nothing to see" }), null);
  assert.equal(tokensSaved({ compression_anchor_details: { tokens_before: 10, tokens_after: 20 } }), null);
});

test("token counts read as people write them", () => {
  assert.equal(formatTokens(999), "999");
  assert.equal(formatTokens(12000), "12k");
  assert.equal(formatTokens(12345), "12.3k");
  assert.equal(formatTokens(250000), "250k");
  assert.equal(formatTokens(Number.NaN), "?");
});

test("the marker follows the index the server sends, and nothing else", () => {
  assert.equal(anchorMessageIdx({ compression_anchor_idx: 7 }), 7);
  assert.equal(anchorMessageIdx({ compression_anchor_idx: null, compression_anchor_visible_idx: 0 }), null);
  assert.equal(anchorMessageIdx(null), null);
});

// What the store guarantees, made visible: the compression marker, the context meter, the recovery banner.

import { el } from "./dom.js";

function collapse(text) {
  return String(text || "").replace(/\s+/g, " ").trim();
}

// The `_idx` of the message the compression marker follows, as the server sends it (the anchor rules live
// there); null when the session was never compressed or the anchor's row is gone.
export function anchorMessageIdx(session) {
  return Number.isInteger(session?.compression_anchor_idx) ? session.compression_anchor_idx : null;
}

function parseCount(text) {
  return Number(String(text).replace(/[,\s]/g, ""));
}

// "~12,345 → ~2,000 tokens" (hermes-agent's token line) or numbers in the anchor details.
export function tokensSaved(session) {
  const details = session && session.compression_anchor_details;
  if (details && typeof details === "object") {
    const before = Number(details.tokens_before ?? details.before_tokens);
    const after = Number(details.tokens_after ?? details.after_tokens);
    if (Number.isFinite(before) && Number.isFinite(after) && before > after) return before - after;
  }
  const match = /~?\s*([\d,]+)\s*(?:→|->)\s*~?\s*([\d,]+)\s*tokens/i.exec(String(session?.compression_anchor_summary || ""));
  if (match) {
    const saved = parseCount(match[1]) - parseCount(match[2]);
    if (Number.isFinite(saved) && saved > 0) return saved;
  }
  return null;
}

export function compressionMarker(session) {
  const details = el("details", "compress-marker");
  const saved = tokensSaved(session);
  const label = saved ? `earlier turns compressed here — about ${saved.toLocaleString("en-US")} tokens saved` : "earlier turns compressed here";
  details.append(el("summary", "compress-marker-label", label));
  const summary = collapse(session.compression_anchor_summary) || "No summary was recorded for this compression.";
  details.append(el("p", "compress-marker-summary", summary));
  return details;
}

export function formatTokens(n) {
  if (!Number.isFinite(n)) return "?";
  if (n < 1000) return String(Math.round(n));
  if (n < 100000) return `${(n / 1000).toFixed(1).replace(/\.0$/, "")}k`;
  return `${Math.round(n / 1000)}k`;
}

export function updateContextMeter(root, session) {
  const used = Number(session && session.last_prompt_tokens);
  const limit = Number(session && session.context_length);
  if (!session || !Number.isFinite(used) || used <= 0) {
    root.hidden = true;
    return;
  }
  root.hidden = false;
  const bar = root.querySelector("meter");
  const label = root.querySelector(".meter-label");
  if (Number.isFinite(limit) && limit > 0) {
    bar.hidden = false;
    bar.value = Math.min(1, used / limit);
    label.textContent = `${formatTokens(used)} / ${formatTokens(limit)}`;
    root.title = `Context: ${used.toLocaleString("en-US")} of ${limit.toLocaleString("en-US")} tokens`;
  } else {
    bar.hidden = true;
    label.textContent = `${formatTokens(used)} tokens`;
    root.title = `Context: ${used.toLocaleString("en-US")} tokens`;
  }
}

function describeDetail(detail, titleOf) {
  const sid = detail.session_id || detail.sid || "";
  const item = el("li");
  const link = el("a", "banner-link", titleOf(sid) || sid || "a session");
  link.href = `#/s/${sid}`;
  item.append(link);
  const live = Number(detail.live_messages);
  const bak = Number(detail.bak_messages);
  if (Number.isFinite(bak) && bak >= 0) {
    item.append(` — ${Number.isFinite(live) && live >= 0 ? live : 0} → ${bak} messages`);
  }
  return item;
}

// A dismissed notice stays dismissed for the same recovery (a later one shows again).
const DISMISSED_KEY = "talaria:recovery-dismissed";

function recoveryKey(summary) {
  const ids = (summary.details || []).filter((d) => d && d.restored).map((d) => d.session_id || d.sid || "");
  return `${summary.restored}:${ids.join(",")}:${summary.finished_at || summary.started_at || ""}`;
}

// The startup sweep's summary → a dismissible banner (shown only when something was restored).
export function showRecoveryBanner(root, summary, openReport, titleOf = () => null) {
  const restored = Number(summary && summary.restored);
  if (!Number.isFinite(restored) || restored <= 0 || localStorage.getItem(DISMISSED_KEY) === recoveryKey(summary)) {
    root.hidden = true;
    return;
  }
  root.replaceChildren();
  const text = el("p", "banner-text");
  text.append(
    `Recovered ${restored} session${restored === 1 ? "" : "s"} from backup after the last shutdown (the files they replaced were kept). `,
  );
  const link = el("button", "link-btn banner-link", "See the recovery report");
  link.type = "button";
  link.addEventListener("click", () => openReport());
  text.append(link);
  root.append(text);
  const details = Array.isArray(summary.details) ? summary.details.filter((d) => d && typeof d === "object" && d.restored) : [];
  if (details.length) {
    const list = el("ul", "banner-list");
    for (const detail of details.slice(0, 5)) list.append(describeDetail(detail, titleOf));
    if (details.length > 5) list.append(el("li", null, `and ${details.length - 5} more`));
    root.append(list);
  }
  const dismiss = el("button", "icon-btn banner-close", "×");
  dismiss.type = "button";
  dismiss.setAttribute("aria-label", "Dismiss the recovery notice");
  dismiss.addEventListener("click", () => {
    localStorage.setItem(DISMISSED_KEY, recoveryKey(summary));
    root.hidden = true;
  });
  root.append(dismiss);
  root.hidden = false;
}

// The recovery report, readable: what the startup sweep restored and what the audit finds now, with
// sessions by title and files by name only (no folders of the server's disk).

import { api } from "./api.js";
import { ask } from "./dialog.js";
import { el } from "./dom.js";

const KIND_LABELS = {
  shrunken_live: "The session file has fewer messages than its backup",
  corrupt_live: "The session file cannot be read",
  missing_live: "Only a backup is left",
  index_missing: "The sidebar index is missing",
  index_stale: "The sidebar index is out of date",
};

// Absolute paths in free text → their last part.
export function withoutFolders(text) {
  return String(text ?? "").replace(/(?:[A-Za-z]:)?(?:[\\/][^\s\\/'"]+)+[\\/]([^\s\\/'"]+)/g, "$1");
}

function kindLabel(kind) {
  return KIND_LABELS[kind] || String(kind || "finding").replaceAll("_", " ");
}

function sessionLink(sid, titleOf) {
  const link = el("a", "report-session", titleOf(sid) || sid);
  link.href = `#/s/${sid}`;
  return link;
}

export function reportBody(startup, audit, titleOf) {
  const body = el("div", "report");
  const restored = (startup?.details || []).filter((d) => d && d.restored);
  body.append(el("h3", "report-head", "At the last start"));
  if (restored.length) {
    const list = el("ul", "report-list");
    for (const detail of restored) {
      const item = el("li");
      const sid = detail.session_id || detail.sid || "";
      item.append(sessionLink(sid, titleOf), ` was restored from its backup (${Number(detail.live_messages) || 0} → ${Number(detail.bak_messages) || 0} messages); the replaced file was kept.`);
      list.append(item);
    }
    body.append(list);
  } else {
    body.append(el("p", "report-text", "Nothing needed restoring."));
  }
  body.append(el("h3", "report-head", "Now"));
  const items = Array.isArray(audit?.items) ? audit.items : [];
  if (!items.length) {
    body.append(el("p", "report-text", "Every session file is healthy."));
    return body;
  }
  const list = el("ul", "report-list");
  for (const item of items) {
    const row = el("li", `report-item severity-${item.severity || "info"}`);
    row.append(el("strong", null, kindLabel(item.kind)));
    if (item.session_id) row.append(" — ", sessionLink(item.session_id, titleOf));
    if (item.path) row.append(el("span", "report-file", ` (${withoutFolders(item.path)})`));
    if (item.detail) row.append(el("div", "report-detail", withoutFolders(item.detail)));
    list.append(row);
  }
  body.append(list);
  return body;
}

export async function showRecoveryReport(titleOf) {
  const [startup, audit] = await Promise.all([api.recoveryStartup(), api.recoveryAudit()]);
  return ask({ title: "Recovery report", body: reportBody(startup, audit, titleOf), cancelLabel: "Close" });
}

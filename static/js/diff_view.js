// A diff as the page shows it: unified (each line marked added, removed, a hunk or a file header) or side by
// side (old left, new right, each with its line numbers; removed and added lines paired row by row). The
// choice is kept for the next diff; a diff the server cut says where.

import { el } from "./dom.js";

const MODE_KEY = "talaria.diffMode";

export function diffKind(line) {
  if (line.startsWith("+++") || line.startsWith("---") || line.startsWith("diff ") || line.startsWith("index ")) return "meta";
  if (line.startsWith("+")) return "add";
  if (line.startsWith("-")) return "del";
  if (line.startsWith("@@")) return "hunk";
  return "ctx";
}

export function unifiedBlock(text, className = "") {
  const pre = el("pre", `diff-body${className ? ` ${className}` : ""}`);
  for (const line of String(text || "").split("\n")) pre.append(el("span", `diff-line diff-${diffKind(line)}`, `${line}\n`));
  return pre;
}

const HUNK = /^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@/;

// The rows of a side-by-side view: `{hunk}` for a hunk's header, else `{left, right}`, each side
// `{n, text, kind}` (kind "ctx", "del", "add") or null where that side has no line. A run of removed lines
// and the added lines after it are paired in order; file headers are left out.
export function sideBySideRows(text) {
  const rows = [];
  let oldN = 0;
  let newN = 0;
  let dels = [];
  let adds = [];
  const flush = () => {
    for (let i = 0; i < Math.max(dels.length, adds.length); i++) rows.push({ left: dels[i] || null, right: adds[i] || null });
    dels = [];
    adds = [];
  };
  let inHunk = false; // what comes before a file's first hunk is its header (mode lines included)
  for (const line of String(text || "").split("\n")) {
    const kind = diffKind(line);
    if (line.startsWith("diff ")) inHunk = false;
    if (kind === "hunk") {
      flush();
      inHunk = true;
      const found = HUNK.exec(line);
      if (found) [oldN, newN] = [Number(found[1]), Number(found[2])];
      rows.push({ hunk: line });
    } else if (!inHunk || line.startsWith("\\")) {
      continue;
    } else if (line.startsWith("-")) {
      dels.push({ n: oldN++, text: line.slice(1), kind: "del" });
    } else if (line.startsWith("+")) {
      adds.push({ n: newN++, text: line.slice(1), kind: "add" });
    } else {
      flush();
      rows.push({ left: { n: oldN++, text: line.slice(1), kind: "ctx" }, right: { n: newN++, text: line.slice(1), kind: "ctx" } });
    }
  }
  flush();
  // The diff's last newline leaves an empty context line at the end: not a line of either file.
  const last = rows[rows.length - 1];
  if (last && last.left?.kind === "ctx" && last.left.text === "" && last.right?.text === "") rows.pop();
  return rows;
}

function side(cell, row) {
  const kind = cell ? cell.kind : "none";
  row.append(el("td", `diff-num diff-${kind}`, cell ? String(cell.n) : ""), el("td", `diff-text diff-${kind}`, cell ? cell.text : ""));
}

export function sideBySideTable(text) {
  const wrap = el("div", "diff-split");
  const table = el("table", "diff-split-table");
  const head = el("tr", "diff-split-head");
  head.append(el("th", null, ""), el("th", null, "Before"), el("th", null, ""), el("th", null, "After"));
  table.append(head);
  for (const item of sideBySideRows(text)) {
    const row = el("tr");
    if (item.hunk !== undefined) {
      const cell = el("td", "diff-hunk", item.hunk);
      cell.colSpan = 4;
      row.append(cell);
    } else {
      side(item.left, row);
      side(item.right, row);
    }
    table.append(row);
  }
  wrap.append(table);
  return wrap;
}

function savedMode() {
  try {
    return localStorage.getItem(MODE_KEY) === "split" ? "split" : "unified";
  } catch {
    return "unified";
  }
}

// `{diff, truncated, max_lines, lines}` as the server answers it → a box with the mode toggle.
export function diffView(data) {
  const box = el("div", "diff-view");
  const bar = el("div", "diff-modes");
  bar.setAttribute("role", "group");
  bar.setAttribute("aria-label", "Diff layout");
  const body = el("div", "diff-holder");
  const buttons = {};
  const show = (mode) => {
    for (const [name, node] of Object.entries(buttons)) node.setAttribute("aria-pressed", String(name === mode));
    body.replaceChildren(mode === "split" ? sideBySideTable(data.diff) : unifiedBlock(data.diff, "diff-unified"));
    try {
      localStorage.setItem(MODE_KEY, mode);
    } catch {
      // a page without storage keeps the choice for this view only
    }
  };
  for (const [mode, label] of [["unified", "Unified"], ["split", "Side by side"]]) {
    const node = el("button", "btn btn-small", label);
    node.type = "button";
    node.addEventListener("click", () => show(mode));
    buttons[mode] = node;
    bar.append(node);
  }
  box.append(bar, body);
  if (!data.diff) body.append(el("p", "files-note", "No difference."));
  else show(savedMode());
  if (data.truncated) {
    const limit = Number(data.max_lines) || 0;
    const total = Number(data.lines) || 0;
    const note = limit && total ? `The diff is cut at ${limit.toLocaleString()} lines of ${total.toLocaleString()}.` : "The diff is cut here; it is longer.";
    box.append(el("p", "diff-cut", note));
  }
  return box;
}

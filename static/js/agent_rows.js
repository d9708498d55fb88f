// The agent's own conversations from other platforms (CLI, Telegram, cron...) in the sidebar: a filter by
// source (cron and webhook runs, and the subagents a delegation ran — shown on its card — hidden until asked
// for, the choice kept in this browser) and their rows.

import { el } from "./dom.js";

const STORE_KEY = "talaria.agentSources";
export const HIDDEN_BY_DEFAULT = Object.freeze(["cron", "webhook", "subagent"]);

export function sourceOf(row) {
  return String(row.source || "other");
}

// Sources present in `rows`, in order of first appearance (the rows come newest first).
export function sourcesIn(rows) {
  return [...new Set(rows.map(sourceOf))];
}

// Whether a source is shown: the person's choice for it, else shown unless hidden by default.
export function isShown(source, choices) {
  return Object.hasOwn(choices, source) ? Boolean(choices[source]) : !HIDDEN_BY_DEFAULT.includes(source);
}

function readChoices() {
  try {
    const value = JSON.parse(localStorage.getItem(STORE_KEY) || "{}");
    return value && typeof value === "object" && !Array.isArray(value) ? value : {};
  } catch {
    return {};
  }
}

export class AgentRows {
  constructor({ onOpen, onChange }) {
    this.onOpen = onOpen;
    this.onChange = onChange;
    this.choices = readChoices();
  }

  toggle(source) {
    this.choices = { ...this.choices, [source]: !isShown(source, this.choices) };
    try {
      localStorage.setItem(STORE_KEY, JSON.stringify(this.choices));
    } catch {
      // a browser that keeps nothing still filters for this page
    }
    this.onChange();
  }

  // The heading, the source chips and the shown rows; nothing when there are no agent rows at all.
  render(fragment, rows, query) {
    if (!rows.length) return 0;
    const matching = rows.filter((row) => !query || String(row.title || row.id).toLowerCase().includes(query));
    const shown = matching.filter((row) => isShown(sourceOf(row), this.choices));
    fragment.append(el("h2", "group-title", "Other platforms"));
    const chips = el("div", "source-filter");
    chips.setAttribute("role", "group");
    chips.setAttribute("aria-label", "Show sessions from");
    for (const source of sourcesIn(rows)) {
      const chip = el("button", "source-chip", source);
      chip.type = "button";
      chip.dataset.source = source;
      chip.setAttribute("aria-pressed", String(isShown(source, this.choices)));
      chip.addEventListener("click", () => this.toggle(source));
      chips.append(chip);
    }
    fragment.append(chips);
    const list = el("ul", "group");
    for (const row of shown) list.append(this.renderRow(row));
    fragment.append(list);
    return shown.length;
  }

  renderRow(row) {
    const item = el("li", "session-row agent-row");
    item.dataset.sid = row.id;
    item.dataset.source = sourceOf(row);
    const open = el("button", "session-open");
    open.type = "button";
    const count = Number(row.message_count || 0);
    const parts = [row.source, `${count} message${count === 1 ? "" : "s"}`];
    if (row.segments > 1) parts.push(`${row.segments} parts`);
    open.append(el("span", "session-title", row.title || row.id), el("span", "session-meta", parts.filter(Boolean).join(" · ")));
    open.addEventListener("click", () => this.onOpen(row.id, { readOnly: true }));
    item.append(open);
    return item;
  }
}

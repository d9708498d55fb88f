// The header's tools menu: the agent's toolsets with a short description, switched on or off for the open
// session; its next turn runs with them. "Use the default" gives the choice back to the server's default.
// Toolsets the server's TALARIA_AGENT_TOOLSETS ceiling leaves out are shown disabled, with the reason.

import { api } from "./api.js";
import { el } from "./dom.js";
import { toastError } from "./toast.js";

// An MCP server's state under its row: connected with its tool count, still connecting, or why it failed.
export function mcpStateText(state) {
  if (state.status === "connected") return `connected · ${state.tools} tool${state.tools === 1 ? "" : "s"}`;
  if (state.status === "failed") return `not connected: ${state.error || "it did not answer"}`;
  if (state.status === "connecting") return "connecting…";
  return "not connected yet";
}

function mcpState(state) {
  const line = el("span", `toolset-mcp toolset-mcp-${state.status}`, mcpStateText(state));
  line.setAttribute("role", "status");
  return line;
}

export class ToolsMenu {
  constructor({ menu, summary, list, resetButton }) {
    this.menu = menu;
    this.summary = summary;
    this.list = list;
    this.resetButton = resetButton;
    this.sessionId = null;
    this.data = null;
    menu.addEventListener("toggle", () => {
      if (menu.open) this.load();
    });
    list.addEventListener("change", () => this.save(this.checked()));
    resetButton.addEventListener("click", () => this.save(null));
    document.addEventListener("click", (event) => {
      if (menu.open && !menu.contains(event.target)) menu.open = false;
    });
  }

  // The list is asked for when the menu opens, not with every session, so opening a session stays one request.
  update(session) {
    const sid = session && session.session_id && !session.read_only ? session.session_id : null;
    this.menu.hidden = !sid;
    if (sid === this.sessionId) return;
    this.sessionId = sid;
    this.data = null;
    this.menu.open = false;
    this.summary.textContent = "Tools";
    this.list.replaceChildren();
  }

  async load() {
    const sid = this.sessionId;
    if (!sid) return;
    try {
      const data = await api.toolsets(sid);
      if (sid === this.sessionId) this.show(data);
    } catch (err) {
      toastError(err);
    }
  }

  checked() {
    return [...this.list.querySelectorAll("input[type=checkbox]:checked")].map((box) => box.value);
  }

  show(data) {
    this.data = data;
    // A toolset the agent cannot use here (a missing key, or beyond the server's toolsets setting) is shown
    // unticked and locked, with the reason; usable ones come first.
    const usable = (toolset) => toolset.available !== false;
    const row = (toolset) => {
      const label = el("label", usable(toolset) ? "toolset-row" : "toolset-row toolset-unavailable");
      const box = el("input");
      box.type = "checkbox";
      box.value = toolset.name;
      box.checked = toolset.enabled && usable(toolset);
      box.disabled = !usable(toolset);
      const text = el("span", "toolset-text");
      text.append(el("span", "toolset-name", toolset.label), el("span", "toolset-desc", toolset.description));
      if (toolset.mcp) text.append(mcpState(toolset.mcp));
      else if (!usable(toolset)) text.append(el("span", "toolset-reason", toolset.unavailable_reason || "Not available here."));
      label.append(box, text);
      return label;
    };
    // The person's own MCP servers come first, under a heading: they are what a person looks for here.
    const lockedLast = (a, b) => Number(!usable(a)) - Number(!usable(b));
    const servers = data.toolsets.filter((toolset) => toolset.mcp).sort(lockedLast);
    const builtIn = data.toolsets.filter((toolset) => !toolset.mcp).sort(lockedLast);
    const rows = servers.length
      ? [
          el("div", "tools-heading", "MCP servers"),
          ...servers.map(row),
          el("div", "tools-heading", "Agent tools"),
          ...builtIn.map(row),
        ]
      : builtIn.map(row);
    this.list.replaceChildren(...rows);
    const count = data.toolsets.filter((toolset) => toolset.enabled && usable(toolset)).length;
    this.summary.textContent = `Tools ${count}`;
    this.summary.title = data.enabled_toolsets === null ? "Tools: the default set" : "Tools chosen for this session";
    this.resetButton.disabled = data.enabled_toolsets === null;
  }

  async save(names) {
    const sid = this.sessionId;
    try {
      await api.setToolsets(sid, names);
      await this.load();
    } catch (err) {
      toastError(err);
      if (this.data) this.show(this.data);
    }
  }
}

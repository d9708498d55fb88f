// The header's tools menu: the agent's toolsets with a short description, switched on or off for the open
// session; its next turn runs with them. "Use the default" gives the choice back to the server's default.
// Toolsets the server's TALARIA_AGENT_TOOLSETS ceiling leaves out are shown disabled, with the reason.

import { api } from "./api.js";
import { el } from "./render.js";
import { toastError } from "./toast.js";

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
    const row = (toolset) => {
      const line = el("label", "toolset-row");
      const box = el("input");
      box.type = "checkbox";
      box.value = toolset.name;
      box.checked = toolset.enabled;
      box.disabled = toolset.available === false;
      const text = el("span", "toolset-text");
      text.append(el("span", "toolset-name", toolset.label), el("span", "toolset-desc", toolset.description));
      line.append(box, text);
      return line;
    };
    // Toolsets the server's setting does not allow come last, switched off, under the reason.
    const usable = data.toolsets.filter((toolset) => toolset.available !== false);
    const blocked = data.toolsets.filter((toolset) => toolset.available === false);
    const items = usable.map(row);
    if (blocked.length) {
      const group = el("div", "toolset-unavailable");
      group.append(el("p", "toolset-reason", blocked[0].unavailable_reason || "Not allowed on this server"), ...blocked.map(row));
      items.push(group);
    }
    this.list.replaceChildren(...items);
    const count = data.toolsets.filter((toolset) => toolset.enabled).length;
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

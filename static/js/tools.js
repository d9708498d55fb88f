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
    const rows = data.toolsets.map((toolset) => {
      const row = el("label", "toolset-row");
      const box = el("input");
      box.type = "checkbox";
      box.value = toolset.name;
      box.checked = toolset.enabled;
      const text = el("span", "toolset-text");
      text.append(el("span", "toolset-name", toolset.label), el("span", "toolset-desc", toolset.description));
      // A toolset the server's setting does not allow stays listed, switched off, with the reason.
      if (toolset.available === false) {
        box.disabled = true;
        row.classList.add("toolset-unavailable");
        text.append(el("span", "toolset-reason", toolset.unavailable_reason || "Not allowed on this server"));
      }
      row.append(box, text);
      return row;
    });
    this.list.replaceChildren(...rows);
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

// Many sessions at once: "Select" (or a shift-click on a row) puts a checkbox on every row; a shift-click
// selects every row between the last one chosen and this one. The bar acts on the selection in one request
// (move to a project, archive, delete), then offers to undo it. Rows dragged onto a project move the same way.

import { rangeIds, summary, undoRequests } from "./bulk_rules.js";
import { el } from "./dom.js";
import { toast, toastError } from "./toast.js";

const UNDO_MS = 10000;

export class Selection {
  // `shownIds()`: the ids of the rows shown, in order; `changed()`: the list renders again; `send(body)`: the
  // bulk request, whose answer the list takes in; `chooseTarget(title)`: the project to move to.
  // Escape anywhere in `scope` (the sidebar) ends the selection.
  constructor({ scope, bar, button, shownIds, changed, send, chooseTarget }) {
    this.bar = bar;
    this.button = button;
    this.shownIds = shownIds;
    this.changed = changed;
    this.send = send;
    this.chooseTarget = chooseTarget;
    this.active = false;
    this.ids = new Set();
    this.anchor = null;
    button.addEventListener("click", () => (this.active ? this.stop() : this.start()));
    scope.addEventListener("keydown", (event) => {
      if (event.key === "Escape" && this.active && !event.defaultPrevented) {
        event.stopPropagation();
        this.stop();
      }
    });
    this.renderBar();
  }

  start() {
    this.active = true;
    this.renderBar();
    this.changed();
  }

  stop() {
    const focusWasIn = this.bar.contains(document.activeElement) || document.activeElement?.classList.contains("session-check");
    this.active = false;
    this.ids.clear();
    this.anchor = null;
    this.renderBar();
    this.changed();
    if (focusWasIn) this.button.focus();
  }

  has(sessionId) {
    return this.ids.has(sessionId);
  }

  // A row chosen: alone it toggles; with shift, every row shown from the anchor to it is selected.
  choose(sessionId, { shift = false } = {}) {
    if (!this.active) this.start();
    if (shift && this.anchor) {
      for (const id of rangeIds(this.shownIds(), this.anchor, sessionId)) this.ids.add(id);
    } else if (this.ids.has(sessionId)) {
      this.ids.delete(sessionId);
    } else {
      this.ids.add(sessionId);
    }
    this.anchor = sessionId;
    this.renderBar();
    this.changed();
  }

  renderBar() {
    this.button.textContent = this.active ? "Done" : "Select";
    this.button.setAttribute("aria-pressed", String(this.active));
    this.bar.hidden = !this.active;
    if (!this.active) {
      this.bar.replaceChildren();
      return;
    }
    const count = this.ids.size;
    const label = el("span", "bulk-count", `${count} selected`);
    label.setAttribute("aria-live", "polite");
    const button = (text, handler, kind = "") => {
      const node = el("button", `btn btn-small ${kind}`.trim(), text);
      node.type = "button";
      node.disabled = count === 0;
      node.addEventListener("click", handler);
      return node;
    };
    this.bar.replaceChildren(
      label,
      button("Move to…", () => this.move()),
      button("Archive", () => this.run("archive")),
      button("Delete", () => this.run("delete"), "btn-danger"),
    );
  }

  async move() {
    const target = await this.chooseTarget(`Move ${this.ids.size} sessions to`);
    if (target) await this.run("move", { project_id: target.projectId }, target.name);
  }

  // Sessions dragged onto a project (null: "All sessions", out of any): the row dragged, or the whole
  // selection when the row is in it.
  dragged(sessionId) {
    return this.active && this.ids.has(sessionId) ? [...this.ids] : [sessionId];
  }

  async run(action, extra = {}, projectName = null, ids = [...this.ids]) {
    let result;
    try {
      result = await this.send({ action, session_ids: ids, ...extra });
    } catch (err) {
      toastError(err);
      return;
    }
    this.stop();
    const undo = undoRequests(action, result.results);
    toast(summary(action, result, projectName), {
      action: undo.length ? "Undo" : undefined,
      timeout: UNDO_MS,
      kind: result.failed ? "error" : "info",
      onAction: async () => {
        try {
          for (const body of undo) await this.send(body);
          toast("Undone.");
        } catch (err) {
          toastError(err);
        }
      },
    });
  }
}

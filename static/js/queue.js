// Messages waiting for the running turn to end (the session's `queued_messages`), shown under the
// transcript with Edit and Cancel. The server keeps the queue and runs it; every tab shows what the
// server last said (the session's payload, then the turn's `queue` events).

import { el } from "./dom.js";

// Which way a message sent during a turn goes, by the keys that sent it: Enter queues, Ctrl/⌘+Enter
// steers the running turn, Alt+Enter interrupts it and sends the message next.
export function sendMode(event) {
  if (!event) return "queue";
  if (event.altKey) return "interrupt";
  if (event.ctrlKey || event.metaKey) return "steer";
  return "queue";
}

const SOURCE_LABELS = { steer: "steer, sent next", interrupt: "sent after the stop" };

export class QueuePanel {
  constructor({ root, onEdit, onCancel }) {
    this.root = root;
    this.onEdit = onEdit;
    this.onCancel = onCancel;
    this.items = [];
    this.editing = null; // the id of the item being edited: a redraw keeps its text box
    root.addEventListener("click", (event) => this.clicked(event));
    root.addEventListener("keydown", (event) => this.keyDown(event));
  }

  show(items) {
    this.items = Array.isArray(items) ? items : [];
    if (this.editing && !this.items.some((item) => item.id === this.editing)) this.editing = null;
    const editingBox = this.editing ? this.root.querySelector(`[data-qid="${CSS.escape(this.editing)}"] textarea`) : null;
    const draft = editingBox ? editingBox.value : null;
    this.root.replaceChildren();
    this.root.hidden = this.items.length === 0;
    if (!this.items.length) return;
    const count = this.items.length === 1 ? "1 message waits" : `${this.items.length} messages wait`;
    const head = this.items[0].error ? `${count}: the first could not start — edit it to try again, or cancel it` : `${count} for this turn`;
    this.root.append(el("p", "queue-head", head));
    const list = el("ol", "queue-items");
    for (const item of this.items) list.append(this.row(item, item.id === this.editing ? draft ?? item.text : null));
    this.root.append(list);
  }

  row(item, editText) {
    const li = el("li", "queue-item");
    li.dataset.qid = item.id;
    if (item.error) li.classList.add("queue-item-error");
    if (editText !== null) {
      const box = el("textarea", "queue-edit");
      box.value = editText;
      box.rows = 2;
      box.setAttribute("aria-label", "Queued message");
      const save = el("button", "btn btn-small btn-primary", "Save");
      save.type = "button";
      save.dataset.queueAction = "save";
      const cancel = el("button", "btn btn-small", "Keep");
      cancel.type = "button";
      cancel.dataset.queueAction = "keep";
      const actions = el("div", "queue-actions");
      actions.append(save, cancel);
      li.append(box, actions);
      return li;
    }
    const text = el("p", "queue-text", item.text || (item.attachments?.length ? `${item.attachments.length} attachment(s)` : ""));
    li.append(text);
    const tags = [];
    if (SOURCE_LABELS[item.source]) tags.push(el("span", "queue-tag", SOURCE_LABELS[item.source]));
    if (item.error) tags.push(el("span", "queue-tag queue-tag-error", `Could not start: ${item.error}`));
    const actions = el("div", "queue-actions");
    actions.append(...tags);
    const edit = el("button", "link-btn", "Edit");
    edit.type = "button";
    edit.dataset.queueAction = "edit";
    edit.setAttribute("aria-label", `Edit the queued message “${(item.text || "").slice(0, 40)}”`);
    const cancel = el("button", "link-btn queue-cancel", "Cancel");
    cancel.type = "button";
    cancel.dataset.queueAction = "cancel";
    cancel.setAttribute("aria-label", `Cancel the queued message “${(item.text || "").slice(0, 40)}”`);
    actions.append(edit, cancel);
    li.append(actions);
    return li;
  }

  clicked(event) {
    const button = event.target.closest("[data-queue-action]");
    const li = button?.closest(".queue-item");
    if (!li) return;
    const id = li.dataset.qid;
    const action = button.dataset.queueAction;
    if (action === "edit") {
      this.editing = id;
      this.show(this.items);
      const box = this.root.querySelector(`[data-qid="${CSS.escape(id)}"] textarea`);
      box?.focus();
      box?.setSelectionRange(box.value.length, box.value.length);
    } else if (action === "keep") {
      this.editing = null;
      this.show(this.items);
    } else if (action === "save") {
      this.save(li);
    } else if (action === "cancel") {
      this.onCancel?.(id);
    }
  }

  keyDown(event) {
    const box = event.target.closest(".queue-edit");
    if (!box) return;
    if (event.key === "Enter" && !event.shiftKey) {
      event.preventDefault();
      this.save(box.closest(".queue-item"));
    } else if (event.key === "Escape") {
      event.preventDefault();
      event.stopPropagation();
      this.editing = null;
      this.show(this.items);
    }
  }

  async save(li) {
    const text = li.querySelector("textarea")?.value ?? "";
    if (!text.trim()) return;
    const id = li.dataset.qid;
    if ((await this.onEdit?.(id, text)) !== false) {
      this.editing = null;
      this.show(this.items);
    }
  }
}

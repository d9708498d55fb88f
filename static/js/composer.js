// The composer: Enter sends, Shift+Enter adds a line, slash commands (commands.js) with a completion list,
// and the "edit your last message" mode. While a turn runs, Send becomes Queue, with Steer and Interrupt in
// its menu (and on Ctrl/⌘+Enter and Alt+Enter, queue.js `sendMode`).

import { completions, parseSlash } from "./commands.js";
import { el } from "./dom.js";
import { sendMode } from "./queue.js";

const STREAMING_HINT = "Enter queues · Ctrl+Enter steers · Alt+Enter interrupts";
const STREAMING_HINT_SHORT = "Queue a message…"; // a phone has no such keys

export class Composer {
  constructor({ form, input, sendButton, stopButton, queueGroup, list, editNote, editCancel, status, onSend, onCommand, onStop }) {
    Object.assign(this, { form, input, sendButton, stopButton, queueGroup, list, editNote, status });
    this.streaming = false;
    this.narrow = window.matchMedia("(max-width: 760px)");
    this.narrow.addEventListener("change", () => this.setStreaming(this.streaming)); // the hint fits the width
    this.onSend = onSend;
    this.onCommand = onCommand;
    this.onStop = onStop;
    this.options = [];
    this.active = 0;
    this.editing = null;
    this.busy = false;
    this.placeholder = input.placeholder;
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      this.submit();
    });
    input.addEventListener("keydown", (event) => this.onKeyDown(event));
    input.addEventListener("input", () => this.updateCompletions());
    input.addEventListener("blur", () => setTimeout(() => this.closeCompletions(), 150));
    stopButton.addEventListener("click", () => this.onStop?.());
    this.queueMenu = queueGroup.querySelector('[role="menu"]');
    this.queueToggle = queueGroup.querySelector("[aria-haspopup]");
    queueGroup.querySelector("#queue-send").addEventListener("click", () => this.submit("queue"));
    this.queueToggle.addEventListener("click", () => this.toggleQueueMenu());
    this.queueMenu.addEventListener("click", (event) => {
      const item = event.target.closest("[data-mode]");
      if (!item) return;
      this.toggleQueueMenu(false);
      this.submit(item.dataset.mode);
    });
    this.queueMenu.addEventListener("keydown", (event) => {
      if (event.key !== "Escape") return;
      event.stopPropagation();
      this.toggleQueueMenu(false);
      this.queueToggle.focus();
    });
    document.addEventListener("click", (event) => {
      if (!queueGroup.contains(event.target)) this.toggleQueueMenu(false);
    });
    editCancel.addEventListener("click", () => this.cancelEdit());
  }

  onKeyDown(event) {
    if (event.isComposing) return;
    if (this.options.length) {
      if (event.key === "ArrowDown" || event.key === "ArrowUp") {
        event.preventDefault();
        const step = event.key === "ArrowDown" ? 1 : -1;
        this.active = (this.active + step + this.options.length) % this.options.length;
        this.renderCompletions();
        return;
      }
      const typed = parseSlash(this.input.value);
      if (event.key === "Tab" || (event.key === "Enter" && !event.shiftKey && (!typed || typed.unknown))) {
        event.preventDefault();
        this.choose(this.options[this.active]);
        return;
      }
      if (event.key === "Escape") {
        event.preventDefault();
        event.stopPropagation();
        this.closeCompletions();
        return;
      }
    }
    if (event.key === "Escape" && this.editing !== null) {
      event.preventDefault();
      event.stopPropagation();
      this.cancelEdit();
      return;
    }
    if (event.key === "Enter" && !event.shiftKey) {
      event.preventDefault();
      this.submit(this.streaming ? sendMode(event) : undefined);
    }
  }

  toggleQueueMenu(open = this.queueMenu.hidden) {
    this.queueMenu.hidden = !open;
    this.queueToggle.setAttribute("aria-expanded", String(open));
    if (open) this.queueMenu.querySelector("[data-mode]")?.focus();
  }

  // `mode` (queue, steer, interrupt) only while a turn runs: how the message reaches it.
  async submit(mode) {
    const text = this.input.value;
    if (!text.trim() || this.busy) return;
    this.closeCompletions();
    const command = this.editing === null ? parseSlash(text) : null;
    if (command?.unknown) {
      this.offerAsText(command.name, text);
      return;
    }
    const editing = this.editing;
    this.busy = true;
    try {
      const accepted = command
        ? await this.onCommand?.(command.name, command.arg)
        : await this.onSend?.(text, { editIdx: editing, mode });
      if (accepted !== false) {
        this.input.value = "";
        this.input.dispatchEvent(new Event("input")); // listeners (the kept draft) see the box emptied
        if (editing !== null) this.cancelEdit({ keepText: true });
      }
    } finally {
      this.busy = false;
    }
  }

  // An unknown /word is never sent to the model by accident: the person sees that it is unknown and can send
  // it as text on purpose.
  offerAsText(name, text) {
    const send = el("button", "link-btn", "Send as text");
    send.type = "button";
    send.addEventListener("click", async () => {
      this.setStatus("");
      if (this.input.value !== text || this.busy) return;
      this.busy = true;
      try {
        if ((await this.onSend?.(text, { editIdx: null })) !== false) this.input.value = "";
      } finally {
        this.busy = false;
      }
    });
    this.status.replaceChildren(`/${name} is not a command (type / to see them). `, send);
    this.input.addEventListener("input", () => this.setStatus(""), { once: true });
  }

  choose(option) {
    if (!option) return;
    this.input.value = `/${option.name}${option.args ? " " : ""}`;
    this.closeCompletions();
    this.input.focus();
    if (!option.args) this.updateCompletions();
  }

  updateCompletions() {
    this.options = this.editing === null ? completions(this.input.value) : [];
    if (this.options.length === 1 && `/${this.options[0].name}` === this.input.value.trim() && !this.options[0].args) {
      this.options = [];
    }
    this.active = Math.min(this.active, Math.max(0, this.options.length - 1));
    this.renderCompletions();
  }

  refreshCompletions() {
    if (!this.list.hidden || /^\/[a-z0-9_-]*$/i.test(this.input.value)) this.updateCompletions();
  }

  renderCompletions() {
    this.list.replaceChildren();
    this.list.hidden = this.options.length === 0;
    this.input.setAttribute("aria-expanded", String(!this.list.hidden));
    this.options.forEach((option, i) => {
      const item = el("li", "slash-item");
      item.id = `slash-${option.name}`;
      item.setAttribute("role", "option");
      item.setAttribute("aria-selected", String(i === this.active));
      item.append(el("span", "slash-name", `/${option.name}${option.args ? ` ${option.args}` : ""}`), el("span", "slash-help", option.help));
      item.addEventListener("mousedown", (event) => {
        event.preventDefault();
        this.choose(option);
      });
      this.list.append(item);
    });
    if (this.options.length) this.input.setAttribute("aria-activedescendant", `slash-${this.options[this.active].name}`);
    else this.input.removeAttribute("aria-activedescendant");
  }

  closeCompletions() {
    this.options = [];
    this.renderCompletions();
  }

  startEdit(msg, text) {
    this.editing = msg._idx;
    this.editNote.hidden = false;
    this.input.value = text;
    this.input.focus();
    this.input.setSelectionRange(text.length, text.length);
  }

  cancelEdit({ keepText = false } = {}) {
    if (this.editing === null) return;
    this.editing = null;
    this.editNote.hidden = true;
    if (!keepText) this.input.value = "";
  }

  setStreaming(streaming) {
    this.streaming = streaming;
    this.sendButton.hidden = streaming;
    this.queueGroup.hidden = !streaming;
    this.stopButton.hidden = !streaming;
    if (!streaming) this.toggleQueueMenu(false);
    const hint = this.narrow.matches ? STREAMING_HINT_SHORT : STREAMING_HINT;
    if (!this.input.disabled) this.input.placeholder = streaming ? hint : this.placeholder;
  }

  setEnabled(enabled, placeholder) {
    this.input.disabled = !enabled;
    this.sendButton.disabled = !enabled;
    this.input.placeholder = placeholder || this.placeholder;
  }

  setStatus(text) {
    this.status.textContent = text || "";
  }

  focus() {
    this.input.focus();
  }

  // What the person typed and has not sent yet.
  draft() {
    return this.input.value.trim();
  }
}

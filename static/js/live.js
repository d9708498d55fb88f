// The answer being streamed: text token by token, reasoning, tool cards, status lines. It is plain text
// while it streams; on `done` the chat view replaces it with the server-rendered transcript.

import { el, reasoningBlock, setToolResult, toolCard } from "./render.js";

export class LiveTurn {
  constructor(container) {
    this.article = el("article", "msg msg-assistant live");
    this.article.dataset.role = "assistant";
    this.article.setAttribute("aria-busy", "true");
    const head = el("header", "msg-head");
    head.append(el("span", "msg-role", "Hermes"));
    this.statusLine = el("span", "live-status", "thinking…");
    head.append(this.statusLine);
    this.article.append(head);
    this.reasoningBody = null;
    this.textNode = null;
    this.cards = new Map();
    this.text = "";
    container.append(this.article);
  }

  token(text) {
    if (!text) return;
    if (!this.textNode) {
      const body = el("div", "msg-body plain live-text");
      this.textNode = document.createTextNode("");
      body.append(this.textNode);
      this.article.append(body);
    }
    this.textNode.appendData(text);
    this.text += text;
    this.setStatus("");
  }

  reasoning(text) {
    if (!text) return;
    if (!this.reasoningBody) {
      const block = reasoningBlock("");
      this.reasoningBody = block.querySelector(".reasoning-body");
      const head = this.article.querySelector(".msg-head");
      head.after(block);
    }
    this.reasoningBody.append(text);
  }

  tool({ id, name, args }) {
    const card = toolCard({ id, name, args });
    this.article.append(card);
    if (id) this.cards.set(id, card);
    this.textNode = null; // text after a tool call starts a new paragraph below its card
    this.setStatus(`running ${name || "a tool"}…`);
  }

  toolComplete({ id, name, result, is_error: isError }) {
    let card = id ? this.cards.get(id) : null;
    if (!card) {
      card = toolCard({ id, name, args: null });
      this.article.append(card);
    }
    setToolResult(card, result, isError);
    this.setStatus("");
  }

  note(kind, message) {
    this.article.append(el("p", `live-note live-note-${kind}`, message));
  }

  setStatus(text) {
    this.statusLine.textContent = text;
  }

  error(message, hint) {
    this.article.classList.add("msg-failed");
    this.article.append(el("p", "msg-error", hint ? `${message} — ${hint}` : message));
    this.setStatus("");
  }

  cancelled() {
    this.article.classList.add("msg-cancelled");
    this.setStatus("stopped");
  }

  finish() {
    this.article.removeAttribute("aria-busy");
  }

  remove() {
    this.article.remove();
  }
}

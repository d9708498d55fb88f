// The answer being streamed: reasoning, tool cards, status lines, and its text as the server renders it
// (`render` events: the sanitized HTML of each text segment so far, at most every ~100 ms, by the same
// renderer as saved messages). On `done` the chat view swaps in the saved transcript, which renders the
// same text the same way, so nothing re-flows.

import { decorateCode } from "./actions.js";
import { hydrateMedia } from "./media.js";
import { el, reasoningBlock, setToolResult, toolCard } from "./render.js";

export class LiveTurn {
  constructor(container, sessionId) {
    this.sessionId = sessionId;
    this.article = el("article", "msg msg-assistant live");
    this.article.dataset.role = "assistant";
    this.article.setAttribute("aria-busy", "true");
    const head = el("header", "msg-head");
    head.append(el("span", "msg-role", "Hermes"));
    this.statusLine = el("span", "live-status", "thinking…");
    head.append(this.statusLine);
    this.article.append(head);
    this.reasoningBody = null;
    this.segments = []; // one .msg-body per text segment (text between tool calls)
    this.cards = new Map();
    this.text = "";
    container.append(this.article);
  }

  token(text) {
    if (!text) return;
    this.text += text;
    this.setStatus("");
  }

  // The server's rendering of text segment `segment` so far (it replaces the previous one).
  render({ segment, html }) {
    if (!Number.isInteger(segment) || segment < 0 || typeof html !== "string") return;
    let body = this.segments[segment];
    if (!body) {
      body = el("div", "msg-body live-text");
      this.segments[segment] = body;
      this.article.append(body);
    }
    body.innerHTML = html;
    decorateCode(this.article);
    hydrateMedia(body, this.sessionId);
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

// The answer being streamed: reasoning, tool cards, status lines, and its text as the server renders it
// (`render` events, at most every ~100 ms, by the same renderer as saved messages). Each event patches
// one text segment: keep its first `keep` blocks and append `blocks` (sanitized HTML, one top-level
// Markdown block each), or, for a text too long for Markdown, append `plain` text from `plain_from`.
// Blocks before the last one never change, so the page never receives the whole answer again. On `done`
// the chat view swaps in the saved transcript, which renders the same text the same way, so nothing
// re-flows.

import { decorateCode } from "./actions.js";
import { hydrateMedia } from "./media.js";
import { el } from "./dom.js";
import { reasoningBlock, setToolResult, toolCard } from "./render.js";
import { dropOtherCopies, placeWorkCard, tick, updateWorkCard, workCard } from "./work_cards.js";

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
    this.segments = []; // one { body, blocks: [[node...]...], plain: <code> | null } per text segment
    this.cards = new Map();
    this.works = new Map(); // subagent cards by id
    this.ticker = null; // refreshes the running cards' elapsed time each second
    container.append(this.article);
  }

  token(text) {
    if (!text) return;
    this.setStatus("");
  }

  // A patch of text segment `segment` as the server renders it (see the top of this file).
  render({ segment, keep, blocks, plain, plain_from: plainFrom }) {
    if (!Number.isInteger(segment) || segment < 0) return;
    let seg = this.segments[segment];
    if (!seg) {
      seg = { body: el("div", "msg-body live-text"), blocks: [], plain: null, plainChars: 0 };
      this.segments[segment] = seg;
      this.article.append(seg.body);
    }
    if (typeof plain === "string") patchPlain(seg, plain, plainFrom);
    else if (Number.isInteger(keep) && keep >= 0 && keep <= seg.blocks.length && Array.isArray(blocks)) {
      patchBlocks(seg, keep, blocks);
    } else return;
    decorateCode(seg.body);
    hydrateMedia(seg.body, this.sessionId);
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

  // A subagent's card, whole, as it is now: created after its delegation's tool card, then updated.
  work(card) {
    if (!card || typeof card.id !== "string") return;
    const node = this.works.get(card.id);
    if (node) updateWorkCard(node, card, { live: true });
    else {
      const created = workCard(card, { live: true });
      this.works.set(card.id, created);
      placeWorkCard(this.article, created, card.tool_id ? this.cards.get(card.tool_id) : null);
      dropOtherCopies(this.article.ownerDocument, created);
    }
    if (!this.ticker) this.ticker = setInterval(() => tick(this.article), 1000);
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
    clearInterval(this.ticker);
    this.ticker = null;
  }

  remove() {
    clearInterval(this.ticker);
    this.ticker = null;
    this.article.remove();
  }
}

function patchBlocks(seg, keep, blocks) {
  if (seg.plain) {
    seg.body.replaceChildren();
    seg.plain = null;
  }
  for (const nodes of seg.blocks.splice(keep)) for (const node of nodes) node.remove();
  const template = document.createElement("template");
  for (const html of blocks) {
    template.innerHTML = typeof html === "string" ? html : "";
    const nodes = [...template.content.childNodes];
    seg.body.append(...nodes);
    seg.blocks.push(nodes);
  }
}

// The server counts characters as code points; a JS string's length counts UTF-16 units.
function codePoints(text) {
  let surrogates = 0;
  for (let i = 0; i < text.length; i++) {
    const unit = text.charCodeAt(i);
    if (unit >= 0xdc00 && unit <= 0xdfff) surrogates += 1; // the second half of a pair
  }
  return text.length - surrogates;
}

function patchPlain(seg, text, from) {
  if (!seg.plain || from === 0) {
    const pre = el("pre", "plain-text");
    seg.plain = el("code");
    pre.append(seg.plain);
    seg.body.replaceChildren(pre, "\n"); // as the server's HTML of the saved message has it
    seg.blocks = [];
    seg.plainChars = 0;
  }
  if (from !== seg.plainChars) return; // a patch out of turn: the next snapshot repairs it
  seg.plain.append(text);
  seg.plainChars += codePoints(text);
}

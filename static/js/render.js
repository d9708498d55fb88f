// DOM builders for transcript rows: messages, reasoning, tool-call cards. The server's `html` is
// sanitized (markdown-it with HTML off, then an nh3 allow-list), so it is inserted as HTML; every other
// string goes in as text.

import { el } from "./dom.js";
import { skillInvocation } from "./skill_message.js";
import { HUMAN_TOOLS, humanView, toolBrief } from "./toolviews.js";
import { usageLabel, usageTitle } from "./usage_labels.js";
import { placeWorkCard, workCard } from "./work_cards.js";

const RESULT_PREVIEW_CHARS = 20000;

export function messageText(msg) {
  const content = msg && msg.content;
  if (typeof content === "string") return content;
  if (Array.isArray(content)) {
    return content
      .map((part) => (typeof part === "string" ? part : part && typeof part.text === "string" ? part.text : ""))
      .filter(Boolean)
      .join("\n\n");
  }
  return "";
}

export function messageTimestamp(msg) {
  for (const key of ["timestamp", "_ts"]) {
    const value = Number(msg && msg[key]);
    if (msg && msg[key] !== "" && msg[key] !== null && Number.isFinite(value) && value > 0) return value;
  }
  return null;
}

export function isCompactionText(text) {
  const head = String(text || "").trimStart().toLowerCase();
  return head.startsWith("[context compaction") || head.startsWith("[your active task list was preserved");
}

function prettyJson(value) {
  if (value === undefined || value === null || value === "") return "";
  if (typeof value === "string") {
    try {
      return JSON.stringify(JSON.parse(value), null, 2);
    } catch {
      return value;
    }
  }
  try {
    return JSON.stringify(value, null, 2);
  } catch {
    return String(value);
  }
}

// One formatter for every row: building an Intl formatter per call costs more than the row itself.
const TIME_FORMAT = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "short" });

function timeLabel(ts) {
  return ts ? TIME_FORMAT.format(new Date(ts * 1000)) : "";
}

export function reasoningBlock(text) {
  const details = el("details", "reasoning");
  details.append(el("summary", "reasoning-summary", "Reasoning"));
  details.append(el("div", "reasoning-body", text || ""));
  return details;
}

// The human view (when the tool has one) of a card's call and result, replacing the previous one.
function showHumanView(card, result) {
  const view = humanView(card.dataset.toolName, card.toolArgs, result);
  if (!view) return;
  view.classList.add("tool-human");
  const old = card.querySelector(":scope > .tool-human");
  if (old) old.replaceWith(view);
  else card.querySelector(":scope > summary").after(view);
}

// A collapsible card for one tool call; its result is filled in later by setToolResult. Tools with a
// human view show it, and their raw JSON sits behind a "Raw JSON" toggle.
export function toolCard({ id, name, args }) {
  const card = el("details", "tool-card");
  if (id) card.dataset.toolCallId = id;
  card.dataset.toolName = name || "tool";
  card.toolArgs = args;
  const summary = el("summary", "tool-summary");
  summary.append(el("span", "tool-icon", "⚙"), el("span", "tool-name", name || "tool"));
  const brief = toolBrief(card.dataset.toolName, args);
  if (brief) summary.append(el("span", "tool-brief", brief));
  summary.append(el("span", "tool-state", "running…"));
  card.append(summary);
  let raw = card;
  if (HUMAN_TOOLS.has(card.dataset.toolName)) {
    raw = el("details", "tool-raw");
    raw.append(el("summary", "tool-raw-summary", "Raw JSON"));
    card.append(raw);
    showHumanView(card, null);
  }
  const argsText = prettyJson(args);
  if (argsText) {
    raw.append(el("div", "tool-label", "Arguments"));
    raw.append(el("pre", "tool-args", argsText));
  }
  return card;
}

// A tool result the agent's approval gate refused (`"status": "blocked"`): the command did not run.
function isBlocked(result) {
  if (typeof result !== "string" || !result.includes('"blocked"')) return false;
  try {
    return JSON.parse(result)?.status === "blocked";
  } catch {
    return false;
  }
}

export function setToolResult(card, result, isError) {
  let pre = card.querySelector(".tool-result");
  if (!pre) {
    const raw = card.querySelector(":scope > .tool-raw") || card;
    raw.append(el("div", "tool-label", "Result"));
    pre = el("pre", "tool-result");
    raw.append(pre);
  }
  showHumanView(card, result);
  let text = prettyJson(result);
  if (text.length > RESULT_PREVIEW_CHARS) {
    text = `${text.slice(0, RESULT_PREVIEW_CHARS)}\n… (${(text.length - RESULT_PREVIEW_CHARS).toLocaleString("en-US")} more characters)`;
  }
  pre.textContent = text;
  const state = card.querySelector(".tool-state");
  const blocked = isBlocked(result);
  if (state) state.textContent = blocked ? "blocked — did not run" : isError ? "failed" : "done";
  card.classList.toggle("tool-error", Boolean(isError || blocked));
}

function toolCallsOf(msg) {
  const calls = Array.isArray(msg.tool_calls) ? msg.tool_calls : [];
  return calls
    .filter((call) => call && typeof call === "object")
    .map((call) => ({
      id: call.id || call.call_id || "",
      name: (call.function && call.function.name) || call.name || "tool",
      args: call.function ? call.function.arguments : call.arguments,
    }));
}

// A message's attachments: images from the workspace (the page points data-media at the media
// route), other files by name and path.
function attachmentList(items) {
  const box = el("div", "msg-attachments");
  for (const item of items) {
    if (!item || typeof item.path !== "string") continue;
    if (item.kind === "image") {
      const img = el("img", "attach-image");
      img.dataset.media = item.path;
      img.alt = item.name || item.path;
      box.append(img);
    } else {
      const chip = el("span", "attach-chip attach-file", item.name || item.path);
      chip.title = item.path;
      box.append(chip);
    }
  }
  return box;
}

function roleLabel(role) {
  if (role === "user") return "You";
  if (role === "assistant") return "Hermes";
  if (role === "system") return "System";
  return role || "message";
}

function skillBody({ skill, instruction }, text) {
  const body = el("div", "msg-body msg-skill");
  body.append(el("div", "skill-line", `⚡ Skill: ${skill}`));
  if (instruction) body.append(el("p", "skill-instruction", instruction));
  const details = el("details", "skill-sent");
  details.append(el("summary", null, "What the agent received"), el("pre", "skill-sent-text", text));
  body.append(details);
  return body;
}

// One message → an <article>; `toolCards` (id → card) collects cards so tool rows can fill them.
export function renderMessage(msg, { toolCards } = {}) {
  const role = msg.role || "unknown";
  const text = messageText(msg);
  const article = el("article", `msg msg-${role}`);
  article.dataset.idx = String(msg._idx);
  article.dataset.role = role;

  if (isCompactionText(text)) {
    article.classList.add("msg-compaction");
    const details = el("details", "compaction");
    details.append(el("summary", "compaction-summary", "Context compaction summary"));
    const body = el("div", "compaction-body");
    if (typeof msg.html === "string") body.innerHTML = msg.html;
    else body.textContent = text;
    details.append(body);
    article.append(details);
    return article;
  }

  const head = el("header", "msg-head");
  head.append(el("span", "msg-role", roleLabel(role)));
  const ts = messageTimestamp(msg);
  if (ts) {
    const time = el("time", "msg-time", timeLabel(ts));
    time.dateTime = new Date(ts * 1000).toISOString();
    head.append(time);
  }
  if (role === "assistant" && typeof msg.model === "string" && msg.model) head.append(el("span", "msg-model", msg.model));
  const spent = role === "assistant" ? usageLabel(msg.usage) : "";
  if (spent) {
    const label = el("span", "msg-usage", spent);
    label.title = usageTitle(msg.usage);
    head.append(label);
  }
  if (msg._partial) head.append(el("span", "badge", "partial"));
  if (msg._pending) article.classList.add("pending");
  article.append(head);

  const reasoning = msg.reasoning || msg.reasoning_content;
  if (typeof reasoning === "string" && reasoning.trim()) article.append(reasoningBlock(reasoning));

  if (role === "tool") {
    const card = toolCard({ id: msg.tool_call_id, name: msg.name || msg.tool_name || "tool result", args: null });
    setToolResult(card, text || msg.content, false);
    article.append(card);
    return article;
  }

  const invoked = role === "user" ? skillInvocation(text) : null;
  if (invoked) {
    article.append(skillBody(invoked, text));
  } else if (text || typeof msg.html === "string") {
    const body = el("div", "msg-body");
    if (typeof msg.html === "string") body.innerHTML = msg.html;
    else body.textContent = text;
    if (typeof msg.html !== "string") body.classList.add("plain");
    article.append(body);
  }

  if (Array.isArray(msg.attachments) && msg.attachments.length) {
    // The lines naming the attachments are for the agent; the page shows the attachments themselves.
    const body = article.querySelector(":scope > .msg-body");
    for (const node of [...(body?.children || [])]) {
      if (/^\[Attached (image|file): /.test(node.textContent)) node.remove();
    }
    if (body && typeof msg.html !== "string") body.textContent = text.replace(/\n*(\[Attached (image|file): [^\n]*\]\n?)+$/, "");
    article.append(attachmentList(msg.attachments));
  }

  for (const call of toolCallsOf(msg)) {
    const card = toolCard(call);
    article.append(card);
    if (toolCards && call.id) toolCards.set(call.id, card);
  }
  for (const work of Array.isArray(msg.work_cards) ? msg.work_cards : []) {
    if (!work || typeof work !== "object") continue;
    const caller = [...article.querySelectorAll(":scope > .tool-card")].find((c) => work.tool_id && c.dataset.toolCallId === work.tool_id);
    placeWorkCard(article, workCard(work), caller);
  }

  if (msg._error) {
    article.classList.add("msg-failed");
    // The error text is usually the content itself; a string flag carries extra detail.
    if (typeof msg._error === "string" && msg._error !== text) article.append(el("p", "msg-error", msg._error));
    if (msg._needs_setup) {
      const button = el("button", "btn btn-small msg-setup", "Set up a model");
      button.type = "button";
      button.dataset.action = "open-setup"; // the setup form listens for these
      article.append(button);
    }
  }
  if (msg._cancelled) {
    article.classList.add("msg-cancelled");
    head.append(el("span", "badge", "stopped"));
  }
  if (msg._interrupted || msg.interrupted) article.classList.add("msg-interrupted");
  return article;
}

// Renders a list of messages; tool rows whose call is on screen fill that card instead of a row.
export function renderMessages(messages, toolCards) {
  const fragment = document.createDocumentFragment();
  let previousRole = null;
  for (const msg of messages) {
    if (msg.role === "tool" && msg.tool_call_id && toolCards.has(msg.tool_call_id)) {
      const card = toolCards.get(msg.tool_call_id);
      setToolResult(card, messageText(msg) || msg.content, Boolean(msg.is_error || msg._error));
      continue;
    }
    const article = renderMessage(msg, { toolCards });
    // One answer that spans tool calls reads as one block.
    if (msg.role === "assistant" && (previousRole === "assistant" || previousRole === "tool")) {
      article.classList.add("msg-continued");
    }
    previousRole = msg.role;
    fragment.append(article);
  }
  return fragment;
}

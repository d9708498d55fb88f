// The chat view: a window of the most recent messages (older ones load on scroll-up through
// `msg_before`), the compression marker, and the live turn streamed over SSE.

import { api } from "./api.js";
import { LiveTurn } from "./live.js";
import { showQuestion } from "./questions.js";
import { anchorMessageIdx, compressionMarker } from "./markers.js";
import { messageText, renderMessages, setToolResult } from "./render.js";
import { copyText, decorateMessages } from "./actions.js";
import { decorateVersions } from "./versions.js";
import { ScrollFollow } from "./follow.js";
import { hydrateMedia } from "./media.js";
import { followStream } from "./sse.js";

export const PAGE_SIZE = 100;

// Gives messages without `_idx` their position in the full transcript (the window ends at `total`).
export function indexMessages(messages, total) {
  const start = Math.max(0, (Number.isInteger(total) ? total : messages.length) - messages.length);
  return messages.map((msg, i) => (Number.isInteger(msg._idx) ? msg : { ...msg, _idx: start + i }));
}

export class ChatView {
  constructor({ transcript, list, sentinel, empty, onSession, onStreaming, onAction, onError, onRendered, onTool, onTurnEvent, onQueue }) {
    this.transcript = transcript;
    this.list = list;
    this.empty = empty;
    this.onSession = onSession;
    this.onStreaming = onStreaming;
    this.onAction = onAction;
    this.onError = onError;
    this.onRendered = onRendered; // after rows are drawn (what decorates them draws again)
    this.onTool = onTool; // a live turn's tool events, as they come
    this.onTurnEvent = onTurnEvent; // every event of the followed turn, before it is drawn
    this.onQueue = onQueue; // the session's queue as the followed turn last said it
    this.session = null;
    this.messages = [];
    this.toolCards = new Map();
    this.loadingOlder = false;
    this.openSeq = 0;
    this.stream = null;
    this.streamId = null;
    this.live = null;
    this.starting = false; // this tab is starting a turn: its own answer brings the stream to follow
    this.catchingUp = false;
    this.missedRow = null; // the sidebar row of this session that changed while a turn streamed
    this.attaching = null;
    this.follower = new ScrollFollow(transcript);
    this.observer = new IntersectionObserver((entries) => {
      if (entries.some((e) => e.isIntersecting)) this.loadOlder();
    }, { root: transcript, rootMargin: "800px 0px 0px 0px" });
    this.observer.observe(sentinel);
    list.addEventListener("click", (event) => this.actionClicked(event));
  }

  actionClicked(event) {
    const button = event.target.closest("[data-action]");
    if (!button || !this.list.contains(button)) return;
    const action = button.dataset.action;
    if (action === "copy-code") {
      copyText(button.parentElement.querySelector("code")?.textContent ?? "");
      return;
    }
    const idx = button.closest(".msg[data-idx]")?.dataset.idx;
    const msg = this.messages.find((m) => String(m._idx) === idx);
    if (!msg) return;
    if (action === "copy") copyText(messageText(msg));
    else this.onAction?.(action, msg);
  }

  get sessionId() {
    return this.session ? this.session.session_id || this.session.id : null;
  }

  get readOnly() {
    return Boolean(this.session && this.session.read_only);
  }

  get streaming() {
    return Boolean(this.streamId);
  }

  async open(sessionId, { messageIdx } = {}) {
    const seq = ++this.openSeq;
    // "talaria:open" measures the last open: from here until its first frame is on screen.
    performance.clearMeasures("talaria:open");
    performance.mark("talaria:open-start");
    this.detachStream();
    const first = await api.session(sessionId, { limit: PAGE_SIZE });
    if (seq !== this.openSeq) return false;
    let session = first.session;
    const firstIdx = session.messages?.length ? session.messages[0]._idx : 0;
    if (Number.isInteger(messageIdx) && messageIdx < firstIdx) {
      // A search hit above the window: load from just before it to the end.
      const total = session.total_messages ?? messageIdx + PAGE_SIZE;
      session = (await api.session(sessionId, { limit: total - messageIdx + 10 })).session;
      if (seq !== this.openSeq) return false;
    }
    this.applySession(session, { replace: true });
    if (Number.isInteger(messageIdx)) this.reveal(messageIdx);
    else this.scrollToBottom();
    await new Promise((resolve) => requestAnimationFrame(() => resolve()));
    performance.measure("talaria:open", "talaria:open-start");
    if (session.active_stream_id && !session.read_only) this.follow(session.active_stream_id);
    return true;
  }

  // Re-reads the current window from the server (after undo, retry, compress, …).
  async reload() {
    const session = await this.readWindow();
    if (!session) return;
    this.applySession(session, { replace: true });
    this.scrollToBottom();
  }

  // The loaded window as the server has it now; null when another session was opened meanwhile.
  async readWindow() {
    const sid = this.sessionId;
    if (!sid) return null;
    const loaded = this.messages.length ? this.messages[this.messages.length - 1]._idx - this.messages[0]._idx + 1 : 0;
    const data = await api.session(sid, { limit: Math.max(PAGE_SIZE, loaded) });
    return sid === this.sessionId ? data.session : null;
  }

  // The open session changed elsewhere (another tab or window), as its sidebar row from the feed says:
  // a turn live there is followed here, any other change of its transcript is read again.
  followElsewhere(row) {
    if (!row || this.readOnly || row.session_id !== this.sessionId || this.starting) return;
    // A file can still name a turn no server runs (its final save failed): only a streaming row is followed.
    const streamId = row.is_streaming ? row.active_stream_id : null;
    if (streamId) {
      if (streamId !== this.streamId) this.attach(streamId).catch((err) => this.onError?.(err));
      return;
    }
    if (this.streaming || this.catchingUp) {
      // The turn's own `done` brings the transcript; a change saved after it (a goal's judgement) is read then.
      this.missedRow = row;
      return;
    }
    this.missedRow = null;
    const changed = row.message_count !== this.session.total_messages || row.updated_at !== this.session.updated_at;
    if (changed) this.catchUp().catch((err) => this.onError?.(err));
  }

  // The open session's sidebar row that changed while a turn streamed or the view caught up, followed now.
  followMissed() {
    const row = this.missedRow;
    this.missedRow = null;
    if (row) this.followElsewhere(row);
  }

  // Shows the transcript as saved now (with the user row of a turn started elsewhere), keeping what a
  // reader who scrolled up is looking at; then follows the turn live in it, if any.
  async catchUp() {
    this.catchingUp = true;
    try {
      const session = await this.readWindow();
      if (!session) return;
      this.keepReadingPosition(() => this.applySession(session, { replace: true }));
      if (session.active_stream_id && session.active_stream_id !== this.streamId) this.follow(session.active_stream_id);
    } finally {
      this.catchingUp = false;
    }
    this.followMissed();
  }

  // Follows a turn started in another tab or window: its user row is read first, then its events from
  // the journal's start (the stream is resumable, so nothing of the turn is missed).
  async attach(streamId) {
    if (this.attaching === streamId) return;
    this.attaching = streamId;
    try {
      await this.catchUp();
    } finally {
      this.attaching = null;
    }
  }

  // Shows a full session payload; `replace` drops what was loaded, otherwise older rows are kept.
  // `renderFrom` (a message index) re-renders only the rows from there on: the rows of a turn that ended.
  applySession(session, { replace = false, renderFrom = null } = {}) {
    const total = Number.isInteger(session.total_messages) ? session.total_messages : (session.messages || []).length;
    let incoming = indexMessages(session.messages || [], total);
    let hasMoreBefore = Boolean(session.has_more_before);
    const sameSession = this.session && (session.session_id || session.id) === this.sessionId;
    if (!replace && sameSession && this.messages.length) {
      const windowStart = this.messages[0]._idx;
      const incomingStart = incoming.length ? incoming[0]._idx : total;
      if (incomingStart <= windowStart) {
        incoming = incoming.filter((m) => m._idx >= windowStart);
        hasMoreBefore = windowStart > 0;
      } else {
        incoming = [...this.messages.filter((m) => m._idx < incomingStart), ...incoming];
        hasMoreBefore = this.hasMoreBefore;
      }
    } else if (incoming.length > PAGE_SIZE && !replace) {
      incoming = incoming.slice(-PAGE_SIZE);
      hasMoreBefore = true;
    }
    const { messages: _dropped, ...meta } = session;
    this.session = meta;
    this.messages = incoming;
    this.hasMoreBefore = hasMoreBefore && incoming.length > 0 && incoming[0]._idx > 0;
    if (Number.isInteger(renderFrom) && !replace && sameSession) this.renderTail(renderFrom);
    else this.renderAll();
    this.onSession?.(meta);
  }

  visibleMessages(messages) {
    // While a turn is live its checkpoint rows are shown by the live bubble instead.
    return this.streamId ? messages.filter((m) => !m._partial) : messages;
  }

  renderAll() {
    this.toolCards = new Map();
    this.list.replaceChildren(renderMessages(this.visibleMessages(this.messages), this.toolCards));
    this.placeMarker();
    this.markEditable();
    this.empty.hidden = this.messages.length > 0 || this.streaming;
    if (this.live) this.list.append(this.live.article);
    hydrateMedia(this.list, this.sessionId);
  }

  // Empties the view without touching what is loaded (a clear waiting out its undo window).
  hideAll() {
    this.list.replaceChildren();
    this.empty.hidden = false;
  }

  renderTail(fromIdx) {
    for (const node of [...this.list.children]) {
      if (node.classList.contains("live") || Number(node.dataset.idx) >= fromIdx) node.remove();
    }
    const tail = this.visibleMessages(this.messages).filter((m) => m._idx >= fromIdx);
    this.list.append(renderMessages(tail, this.toolCards));
    this.placeMarker();
    this.markEditable();
    this.empty.hidden = this.messages.length > 0 || this.streaming;
    if (this.live) this.list.append(this.live.article);
    hydrateMedia(this.list, this.sessionId);
  }

  placeMarker() {
    for (const node of this.list.querySelectorAll(".compress-marker")) node.remove();
    const idx = anchorMessageIdx(this.session);
    if (idx === null) return;
    const after = this.list.querySelector(`.msg[data-idx="${idx}"]`);
    if (after) after.after(compressionMarker(this.session));
  }

  markEditable() {
    decorateMessages(this.list, this.messages, { readOnly: this.readOnly, streaming: this.streaming });
    decorateVersions(this.list, this.session?.message_versions, { readOnly: this.readOnly, streaming: this.streaming });
    this.onRendered?.();
  }

  async loadOlder() {
    if (this.loadingOlder || !this.hasMoreBefore || !this.messages.length || !this.sessionId) return;
    this.loadingOlder = true;
    const sid = this.sessionId;
    const before = this.messages[0]._idx;
    this.transcript.setAttribute("aria-busy", "true");
    try {
      const data = await api.session(sid, { limit: PAGE_SIZE, before });
      if (sid !== this.sessionId || this.messages[0]?._idx !== before) return;
      const older = (data.session.messages || []).filter((m) => Number.isInteger(m._idx) && m._idx < before);
      const anchor = this.list.firstElementChild;
      const anchorTop = anchor ? anchor.getBoundingClientRect().top : 0;
      const cards = new Map();
      const fragment = renderMessages(older, cards);
      this.adoptOrphanResults(cards);
      this.list.prepend(fragment);
      for (const [id, card] of cards) this.toolCards.set(id, card);
      this.messages = [...older, ...this.messages];
      this.hasMoreBefore = Boolean(data.session.has_more_before) && older.length > 0 && older[0]._idx > 0;
      this.placeMarker();
      this.markEditable();
      if (anchor) this.transcript.scrollTop += anchor.getBoundingClientRect().top - anchorTop;
    } catch (err) {
      this.onError?.(err);
    } finally {
      this.loadingOlder = false;
      this.transcript.setAttribute("aria-busy", "false");
    }
  }

  // Tool results shown on their own (their call was outside the window) move into the new cards.
  adoptOrphanResults(cards) {
    for (const article of this.list.querySelectorAll('.msg-tool')) {
      const orphan = article.querySelector(".tool-card");
      const card = orphan && cards.get(orphan.dataset.toolCallId);
      if (!card) continue;
      setToolResult(card, orphan.querySelector(".tool-result")?.textContent || "", orphan.classList.contains("tool-error"));
      article.remove();
    }
  }

  reveal(idx) {
    const target = this.list.querySelector(`.msg[data-idx="${idx}"]`);
    if (!target) return this.scrollToBottom();
    target.classList.add("highlight");
    target.scrollIntoView({ block: "center" });
    setTimeout(() => target.classList.remove("highlight"), 2500);
  }

  scrollToBottom() {
    this.follower.jump();
  }

  // The user row that opened the turn `msg` belongs to.
  turnUser(msg) {
    for (let i = this.messages.length - 1; i >= 0; i--) {
      const m = this.messages[i];
      if (m.role === "user" && m._idx <= msg._idx) return m;
    }
    return null;
  }

  lastUserIdx() {
    for (let i = this.messages.length - 1; i >= 0; i--) if (this.messages[i].role === "user") return this.messages[i]._idx;
    return null;
  }

  // Re-renders without moving what a reader who scrolled up is looking at (or, pinned, the end).
  keepReadingPosition(rerender) {
    if (this.follower.pinned) {
      rerender();
      this.follower.contentChanged();
      return;
    }
    const top = this.transcript.getBoundingClientRect().top;
    const anchor = [...this.list.querySelectorAll(".msg[data-idx]")].find((n) => n.getBoundingClientRect().bottom > top);
    const idx = anchor?.dataset.idx;
    const offset = anchor ? anchor.getBoundingClientRect().top : 0;
    rerender();
    const restore = () => {
      const again = idx !== undefined ? this.list.querySelector(`.msg[data-idx="${idx}"]`) : null;
      if (again) this.transcript.scrollTop += again.getBoundingClientRect().top - offset;
    };
    restore();
    requestAnimationFrame(restore); // rows above settle their real heights on the next frame
  }

  showEmpty() {
    this.detachStream();
    this.openSeq += 1;
    this.session = null;
    this.messages = [];
    this.list.replaceChildren();
    this.empty.hidden = false;
    this.onSession?.(null);
  }

  // Shows the message being sent right away; the server's copy replaces it when the turn ends.
  appendUserBubble(text) {
    const last = this.messages[this.messages.length - 1];
    const idx = last ? last._idx + 1 : Number(this.session?.total_messages || 0);
    this.messages.push({ role: "user", content: text, _idx: idx, timestamp: Date.now() / 1000, _pending: true });
    this.renderAll();
    this.scrollToBottom();
  }

  dropPending() {
    this.messages = this.messages.filter((m) => !m._pending);
    this.renderAll();
  }

  // Streams a turn into a live bubble; on `done` the transcript is re-rendered from the server's truth.
  follow(streamId) {
    this.detachStream();
    const sid = this.sessionId;
    this.streamId = streamId;
    this.live = new LiveTurn(this.list, sid);
    this.renderAll();
    this.scrollToBottom();
    this.onStreaming?.(true);
    const live = this.live;
    const handle = followStream(streamId, {
      onEvent: (name, data) => {
        if (this.stream !== handle) return;
        this.onTurnEvent?.(name, data || {}, { sessionId: sid, streamId });
        this.handleEvent(live, name, data || {});
        this.follower.contentChanged();
      },
      onReconnecting: () => live.setStatus("reconnecting…"),
      onOpen: () => {
        if (live.statusLine.textContent === "reconnecting…") live.setStatus("");
      },
      onGone: () => {
        if (this.stream !== handle) return;
        this.endStream();
        if (this.sessionId === sid) this.reload().catch((err) => this.onError?.(err));
      },
    });
    this.stream = handle;
  }

  handleEvent(live, name, data) {
    switch (name) {
      case "token":
        live.token(data.text);
        break;
      case "render":
        live.render(data);
        break;
      case "reasoning":
        live.reasoning(data.text);
        break;
      case "tool":
        live.tool(data);
        this.onTool?.(name, data);
        break;
      case "tool_complete":
        live.toolComplete(data);
        this.onTool?.(name, data);
        break;
      case "work":
        live.work(data);
        break;
      case "status":
        live.setStatus(data.message || "");
        break;
      case "compressing":
        live.setStatus(data.message || "compressing context…");
        break;
      case "compressed":
        live.note("compressed", "Context compressed to make room.");
        break;
      case "error":
        live.error(data.message || "The turn failed.", data.hint);
        break;
      case "cancelled":
        live.cancelled();
        break;
      case "queue":
        this.onQueue?.(data.queue || []);
        break;
      case "steer":
        live.note("steer", `Steered: ${data.text || ""}`);
        break;
      case "approval":
      case "approval_resolved":
      case "clarify":
      case "clarify_resolved":
        showQuestion(live, name, data);
        break;
      case "done":
        live.finish();
        this.endStream();
        if (data.session) {
          const renderFrom = this.lastUserIdx();
          this.keepReadingPosition(() => this.applySession(data.session, { renderFrom }));
          this.followMissed();
        }
        else this.reload().catch((err) => this.onError?.(err));
        break;
      default:
        break;
    }
  }

  endStream() {
    // A count of finished turns: lets tests and tools wait for "the answer is in".
    this.transcript.dataset.turnsDone = String(Number(this.transcript.dataset.turnsDone || 0) + 1);
    this.stream?.close();
    this.stream = null;
    this.streamId = null;
    this.live?.remove();
    this.live = null;
    this.onStreaming?.(false);
  }

  // Leaves a stream without stopping the turn (switching sessions); the server keeps it running.
  detachStream() {
    if (this.stream) this.endStream();
  }

  async stop() {
    if (!this.streamId) return;
    this.live?.setStatus("stopping…");
    await api.chatCancel(this.streamId, this.sessionId);
  }
}

// The sidebar: sessions by recency (pinned first), title filter, content search, row actions, and the
// agent's own sessions from other platforms (read-only). The list arrives in pages ("Show more") and
// then follows the server's change feed, so every tab sees a change made in any other. A project's view
// (projects.js) reads that project's pages; a selection (bulk_select.js) puts a checkbox on each row.

import { AgentRows } from "./agent_rows.js";
import { api } from "./api.js";
import { confirmAction } from "./dialog.js";
import { chooseRow, feedPosition, mergePage, noteFeedPosition, readPosition } from "./freshness.js";
import { el } from "./dom.js";
import { DRAG_TYPE, colourDot } from "./projects.js";
import { closeMenus, rowMenu } from "./row_menu.js";
import { editTitleInRow } from "./row_rename.js";
import { toast, toastError } from "./toast.js";

const DAY = 86400;
const SEARCH_DELAY_MS = 250;
const PAGE_SIZE = 100;
const FEED_URL = "/api/sessions/feed";
const FEED_RETRY_MS = 3000;

function recency(row) {
  return Number(row.last_message_at || row.updated_at || row.created_at || row.started_at || 0);
}

// Pinned first, then newest first; pure so it can be reasoned about apart from the DOM.
export function sortRows(rows) {
  return [...rows].sort((a, b) => Number(Boolean(b.pinned)) - Number(Boolean(a.pinned)) || recency(b) - recency(a));
}

export function groupLabel(row, nowSeconds) {
  if (row.archived) return "Archived";
  if (row.pinned) return "Pinned";
  const startOfToday = new Date(nowSeconds * 1000);
  startOfToday.setHours(0, 0, 0, 0);
  const today = startOfToday.getTime() / 1000;
  const ts = recency(row);
  if (ts >= today) return "Today";
  if (ts >= today - DAY) return "Yesterday";
  if (ts >= today - 7 * DAY) return "Previous 7 days";
  return "Earlier";
}

// The messages a person sees (tool results and the steps of one answer are not counted apart); a row
// whose count the server could not work out shows the stored count.
export function shownCount(row) {
  return Number(Number.isInteger(row.visible_message_count) ? row.visible_message_count : row.message_count || 0);
}

function metaLabel(row) {
  const count = shownCount(row);
  const ts = recency(row);
  const when = ts ? new Date(ts * 1000).toLocaleDateString(undefined, { month: "short", day: "numeric" }) : "";
  return [when, `${count} message${count === 1 ? "" : "s"}`].filter(Boolean).join(" · ");
}

// A search snippet cut into pieces, each marked when it is an occurrence of the query (case-insensitive,
// whitespace collapsed as the server collapses it); the page puts each piece in as text, so nothing in a
// snippet is ever read as HTML.
export function markMatches(snippet, query) {
  const text = String(snippet || "");
  const needle = String(query || "").split(/\s+/).filter(Boolean).join(" ").toLowerCase();
  const lowered = text.toLowerCase();
  if (!needle || lowered.length !== text.length) return text ? [{ text, mark: false }] : [];
  const parts = [];
  let from = 0;
  for (let at = lowered.indexOf(needle); at >= 0; at = lowered.indexOf(needle, from)) {
    if (at > from) parts.push({ text: text.slice(from, at), mark: false });
    parts.push({ text: text.slice(at, at + needle.length), mark: true });
    from = at + needle.length;
  }
  if (from < text.length) parts.push({ text: text.slice(from), mark: false });
  return parts;
}

const ENTITIES = { "&amp;": "&", "&lt;": "<", "&gt;": ">", "&quot;": '"', "&#x27;": "'" };

// The server's marked snippet (every character escaped, each matched word in <mark>) cut into the same
// pieces as markMatches: the page never reads it as HTML, it decodes the five escapes and puts in text.
export function markedPieces(snippetHtml) {
  const parts = [];
  String(snippetHtml || "")
    .split(/(<mark>|<\/mark>)/)
    .reduce((inMark, piece) => {
      if (piece === "<mark>") return true;
      if (piece === "</mark>") return false;
      const text = piece.replace(/&(?:amp|lt|gt|quot|#x27);/g, (entity) => ENTITIES[entity]);
      if (text) parts.push({ text, mark: inMark });
      return inMark;
    }, false);
  return parts;
}

function snippetNode(match, query) {
  const node = el("span", "session-snippet");
  const parts = match.snippet_html ? markedPieces(match.snippet_html) : markMatches(match.snippet, query);
  for (const part of parts) node.append(part.mark ? el("mark", null, part.text) : part.text);
  return node;
}

// While the server builds its search index again, results come from reading every file: say so.
export function indexNote(index) {
  if (!index || index.state !== "rebuilding") return "";
  return `Search index rebuilding (${Math.floor(Number(index.progress || 0) * 100)}%): results may be incomplete.`;
}

// A session never written in (no messages, no title of its own) is left out of the list, as
// hermes-webui does, unless it is the one open.
function isEmptyUntitled(row, currentId) {
  return !row.message_count && (!row.title || row.title === "Untitled") && !row.pinned && row.session_id !== currentId;
}

export class SessionList {
  constructor({ root, filterInput, archivedToggle, onOpen, onDeleted, onChanged, onFeedChanged, onFeedRemoved, onTurnEnded }) {
    this.root = root;
    this.filterInput = filterInput;
    this.archivedToggle = archivedToggle;
    this.onOpen = onOpen;
    this.onDeleted = onDeleted;
    this.onChanged = onChanged;
    this.onFeedChanged = onFeedChanged;
    this.onTurnEnded = onTurnEnded;
    this.onFeedRemoved = onFeedRemoved;
    this.rows = []; // each with `_seq`, the feed position it is current to (freshness.js)
    this.removedAt = new Map(); // session id -> the feed change that removed it
    this.deleting = new Set(); // sessions this tab is deleting: the feed's removal of them is no news here
    this.agentRows = [];
    this.agent = new AgentRows({ onOpen, onChange: () => this.render() });
    this.nextCursor = null;
    this.feed = null;
    this.currentId = null;
    this.matches = [];
    this.indexNote = "";
    this.searchSeq = 0;
    this.searchTimer = null;
    this.projectId = null; // the project shown, null: every session
    this.projects = null; // projects.js's ProjectPanel: names and colours, the move dialog
    this.selection = null; // bulk_select.js's Selection
    this.shown = []; // the ids of the rows shown, in order (a shift-click's range)
    this.renaming = null; // the session whose title is being edited in its row
    filterInput.addEventListener("input", () => {
      this.closeMenus(); // what the person types shows at once
      this.onFilterInput();
    });
    filterInput.addEventListener("keydown", (event) => {
      if (event.key === "Escape" && filterInput.value) {
        filterInput.value = "";
        this.onFilterInput();
        event.stopPropagation();
      }
    });
    archivedToggle.addEventListener("change", () => {
      this.closeMenus();
      this.render();
    });
    document.addEventListener("click", (event) => {
      if (!event.target.closest(".session-actions")) this.closeMenus();
    });
  }

  // The first page, then the feed from the moment the page was read. While the feed runs, changes it
  // brought after the page was read stay; otherwise the page replaces the list.
  async refresh() {
    const data = await api.sessions({ limit: PAGE_SIZE, projectId: this.projectId });
    const rows = Array.isArray(data.sessions) ? data.sessions : [];
    const seq = Number.isFinite(data.feed_seq) ? data.feed_seq : feedPosition();
    if (this.following()) {
      this.rows = mergePage(this.rows, rows, seq, this.removedAt);
    } else {
      this.rows = mergePage([], rows, seq, new Map());
      this.removedAt.clear();
      noteFeedPosition(seq);
    }
    this.agentRows = Array.isArray(data.agent_sessions) ? data.agent_sessions : [];
    this.nextCursor = data.next_cursor || null;
    this.render();
    this.follow(data.feed_seq);
  }

  async loadMore() {
    if (!this.nextCursor) return;
    try {
      const data = await api.sessions({ limit: PAGE_SIZE, cursor: this.nextCursor, projectId: this.projectId });
      const seq = Number.isFinite(data.feed_seq) ? data.feed_seq : feedPosition();
      const known = new Set(this.rows.map((r) => r.session_id));
      const older = (data.sessions || []).filter((r) => !known.has(r.session_id));
      this.rows.push(...mergePage([], older, seq, this.removedAt));
      this.nextCursor = data.next_cursor || null;
      this.render();
    } catch (err) {
      toastError(err);
    }
  }

  // Show one project's sessions (null: all of them), from its first page.
  async setProject(projectId) {
    this.projectId = projectId || null;
    this.nextCursor = null;
    this.render();
    await this.refresh();
  }

  // A bulk action (bulk_select.js) sent, and each session it changed taken in (or removed when deleted).
  // The sessions being deleted are this tab's doing: the feed's removal of the open one is no news here.
  async sendBulk(body) {
    const deleting = body.action === "delete" ? body.session_ids : [];
    for (const sid of deleting) this.deleting.add(sid);
    let result;
    try {
      result = await api.bulk(body);
    } finally {
      for (const sid of deleting) this.deleting.delete(sid);
    }
    for (const outcome of result.results || []) {
      if (!outcome.ok) continue;
      if (body.action === "delete") {
        this.remove(outcome.session_id);
        this.onDeleted?.(outcome.session_id);
      } else if (outcome.session) {
        this.upsert(outcome.session);
      }
    }
    return result;
  }

  following() {
    return Boolean(this.feed && this.feed.readyState !== EventSource.CLOSED);
  }

  // One EventSource per tab; it reconnects by itself with the last event id it saw.
  follow(feedSeq) {
    if (this.following()) return;
    const after = Number.isFinite(feedSeq) ? `?after=${feedSeq}` : "";
    this.feed = new EventSource(FEED_URL + after);
    this.feed.addEventListener("sessions", (event) => {
      let change;
      try {
        change = JSON.parse(event.data);
      } catch {
        return;
      }
      const seq = Number(event.lastEventId);
      if (!Number.isFinite(seq)) return;
      noteFeedPosition(seq);
      this.apply(change.upsert || [], change.remove || [], seq);
    });
    this.feed.addEventListener("agent_sessions", (event) => {
      try {
        const rows = JSON.parse(event.data).agent_sessions;
        if (Array.isArray(rows)) this.agentRows = rows;
      } catch {
        return;
      }
      this.render();
    });
    const feed = this.feed;
    feed.addEventListener("error", () => {
      // A dropped connection reconnects by itself; a refused one (a lost login, a server error) is closed
      // for good, so the list is read again in a while and followed from there.
      if (feed.readyState !== EventSource.CLOSED || this.feed !== feed) return;
      this.feed = null;
      this.retryFollowing();
    });
    this.feed.addEventListener("reset", () => {
      this.feed.close();
      this.feed = null;
      this.refresh().catch(() => {});
    });
  }

  retryFollowing() {
    setTimeout(() => this.refresh().catch(() => this.retryFollowing()), FEED_RETRY_MS);
  }

  // A change of the feed, numbered `seq`: its rows are current to it.
  apply(upserts, removes, seq) {
    for (const row of upserts) {
      const before = row?.session_id ? this.find(row.session_id) : null;
      this.merge(row, seq);
      const after = before && this.find(row.session_id);
      // A turn that ran and is over: the tab may tell the person (notify.js), whichever session it was.
      if (before?.is_streaming && before.active_stream_id && after && !after.is_streaming) {
        this.onTurnEnded?.(after, before.active_stream_id);
      }
    }
    for (const sid of removes) this.removedAt.set(sid, seq);
    if (removes.length) this.rows = this.rows.filter((r) => !removes.includes(r.session_id));
    this.render();
    const open = upserts.find((row) => row && row.session_id === this.currentId);
    if (open) this.onFeedChanged?.(this.find(open.session_id));
    const gone = this.currentId && removes.includes(this.currentId) && !this.deleting.has(this.currentId);
    if (gone) this.onFeedRemoved?.(this.currentId);
  }

  // Keeps the newer of the tab's row and `row` (current to `seq`; null when its age is unknown).
  merge(row, seq) {
    if (!row || !row.session_id) return;
    const index = this.rows.findIndex((r) => r.session_id === row.session_id);
    const kept = chooseRow(this.rows[index], row, seq, this.removedAt.get(row.session_id));
    if (index >= 0) this.rows[index] = kept;
    else if (kept) this.rows.unshift(kept);
  }

  // A session from an answer (api.js marks when its request started), or a copy of one.
  upsert(row) {
    this.merge(row, readPosition(row));
    this.render();
  }

  remove(sessionId) {
    this.rows = this.rows.filter((r) => r.session_id !== sessionId);
    this.render();
  }

  find(sessionId) {
    return this.rows.find((r) => r.session_id === sessionId) || this.agentRows.find((r) => r.id === sessionId) || null;
  }

  // An agent conversation continued here: its Talaria session takes the place of the agent's row.
  continued(agentId, row) {
    this.agentRows = this.agentRows.filter((r) => r.id !== agentId);
    this.upsert(row);
  }

  isAgentSession(sessionId) {
    return !this.rows.some((r) => r.session_id === sessionId) && this.agentRows.some((r) => r.id === sessionId);
  }

  setCurrent(sessionId) {
    const previous = this.currentId;
    this.currentId = sessionId;
    const left = previous && previous !== sessionId ? this.rows.find((r) => r.session_id === previous) : null;
    if (left && isEmptyUntitled(left, sessionId)) {
      this.render(); // the empty session just left drops out of the list
      return;
    }
    for (const node of this.root.querySelectorAll(".session-row")) {
      const active = node.dataset.sid === sessionId;
      node.classList.toggle("active", active);
      const open = node.querySelector(".session-open");
      if (active) open.setAttribute("aria-current", "page");
      else open.removeAttribute("aria-current");
    }
  }

  focusFilter() {
    this.filterInput.focus();
    this.filterInput.select();
  }

  onFilterInput() {
    clearTimeout(this.searchTimer);
    const q = this.filterInput.value.trim();
    this.render();
    if (q.length < 2) {
      this.matches = [];
      this.searchSeq += 1;
      this.render();
      return;
    }
    this.searchTimer = setTimeout(() => this.searchContent(q), SEARCH_DELAY_MS);
  }

  async searchContent(q) {
    const seq = ++this.searchSeq;
    try {
      const data = await api.search(q);
      if (seq !== this.searchSeq) return; // a newer query is on its way
      this.matches = (data.sessions || []).filter((row) => row.match);
      this.indexNote = indexNote(data.index);
      this.render();
    } catch (err) {
      if (seq === this.searchSeq) toastError(err);
    }
  }

  // A row's menu held open or a title being renamed keeps the list as drawn: a redraw would close the
  // menu or drop the half-typed title, and with sessions streaming the feed redraws every few moments.
  // The redraw waits (the list's `data-held`) and runs once the menu closes or the rename ends.
  held() {
    return this.renaming !== null || Boolean(this.root.querySelector(".session-actions .session-menu:not([hidden])"));
  }

  releaseHeld() {
    // After the click that closed a menu has run its course: that click may be opening another one.
    setTimeout(() => {
      if (this.root.dataset.held && !this.held()) this.render();
    }, 0);
  }

  render() {
    if (this.held()) {
      this.root.dataset.held = "1";
      return;
    }
    delete this.root.dataset.held;
    const q = this.filterInput.value.trim().toLowerCase();
    const showArchived = this.archivedToggle.checked;
    const now = Date.now() / 1000;
    const visible = sortRows(this.rows).filter(
      (row) =>
        (showArchived || !row.archived) &&
        (!this.projectId || row.project_id === this.projectId) &&
        (!q || String(row.title || "").toLowerCase().includes(q)) &&
        !isEmptyUntitled(row, this.currentId),
    );
    this.shown = visible.map((row) => row.session_id);
    const focused = document.activeElement?.closest?.(".session-row")?.dataset.sid;
    const focusedCheck = document.activeElement?.classList?.contains("session-check");
    const fragment = document.createDocumentFragment();
    let currentGroup = null;
    let list = null;
    const order = ["Pinned", "Today", "Yesterday", "Previous 7 days", "Earlier", "Archived"];
    const byGroup = new Map(order.map((name) => [name, []]));
    for (const row of visible) byGroup.get(groupLabel(row, now)).push(row);
    for (const name of order) {
      const rows = byGroup.get(name);
      if (!rows.length) continue;
      if (name !== currentGroup) {
        currentGroup = name;
        fragment.append(el("h2", "group-title", name));
        list = el("ul", "group");
        fragment.append(list);
      }
      for (const row of rows) list.append(this.renderRow(row));
    }
    if (this.nextCursor) {
      const more = el("button", "show-more", "Show more");
      more.type = "button";
      more.addEventListener("click", () => this.loadMore());
      fragment.append(more);
    }
    if (q && this.matches.length) {
      fragment.append(el("h2", "group-title", "Found in messages"));
      if (this.indexNote) fragment.append(el("p", "search-note", this.indexNote));
      const matchList = el("ul", "group matches");
      for (const row of this.matches) matchList.append(this.renderMatch(row));
      fragment.append(matchList);
    }
    const agentShown = this.agent.render(fragment, this.agentRows, q);
    if (!visible.length && !agentShown && !(q && this.matches.length)) {
      const none = this.projectId ? "No sessions in this project yet." : "No sessions yet.";
      fragment.append(el("p", "list-empty", q ? "No session matches." : none));
    }
    this.root.replaceChildren(fragment);
    this.setCurrent(this.currentId);
    if (focusedCheck && focused) this.root.querySelector(`.session-row[data-sid="${CSS.escape(focused)}"] .session-check`)?.focus();
  }

  renderRow(row) {
    const item = el("li", "session-row");
    item.dataset.sid = row.session_id;
    if (row.pinned) item.classList.add("pinned");
    if (row.archived) item.classList.add("archived");
    const open = el("button", "session-open");
    open.type = "button";
    const title = el("span", "session-title", row.title || "Untitled");
    if (row.parent_session_id) {
      item.classList.add("branch");
      title.prepend(el("span", "branch-mark", "↳ "));
      title.title = "A branch of another session";
    }
    const project = this.projects?.find(row.project_id);
    if (!project) this.projects?.noteUnknown(row.project_id);
    if (project) title.prepend(colourDot(project.color, `Project ${project.name}`));
    open.append(title, el("span", "session-meta", metaLabel(row)));
    if (row.is_streaming) open.append(el("span", "live-dot", "●"));
    open.addEventListener("click", (event) => {
      if (this.selection && (event.shiftKey || this.selection.active)) this.selection.choose(row.session_id, { shift: event.shiftKey });
      else this.onOpen(row.session_id);
    });
    if (this.selection?.active) {
      const check = el("input", "session-check");
      check.type = "checkbox";
      check.checked = this.selection.has(row.session_id);
      check.setAttribute("aria-label", `Select ${row.title || "Untitled"}`);
      check.addEventListener("click", (event) => this.selection.choose(row.session_id, { shift: event.shiftKey }));
      item.classList.toggle("selected", check.checked);
      item.append(check);
    }
    if (this.selection) {
      item.draggable = true;
      item.addEventListener("dragstart", (event) => {
        event.dataTransfer.setData(DRAG_TYPE, JSON.stringify(this.selection.dragged(row.session_id)));
        event.dataTransfer.effectAllowed = "move";
      });
    }
    item.append(open, this.renderActions(row));
    return item;
  }

  renderActions(row) {
    const entries = [
      ["Rename", () => this.startRename(row.session_id)],
      [row.pinned ? "Unpin" : "Pin", () => this.mutate(() => api.pin(row.session_id, !row.pinned))],
      [row.archived ? "Unarchive" : "Archive", () => this.mutate(() => api.archive(row.session_id, !row.archived))],
    ];
    if (this.projects) entries.push(["Move to project…", () => this.moveOne(row)]);
    entries.push(["Delete", () => this.delete(row)]);
    return rowMenu("session-actions", `Actions for ${row.title || "Untitled"}`, entries, () => this.closeMenus());
  }

  renderMatch(row) {
    const item = el("li", "session-row match-row");
    const open = el("button", "session-open");
    open.type = "button";
    const query = this.filterInput.value.trim();
    open.append(el("span", "session-title", row.title || "Untitled"), snippetNode(row.match, query));
    open.addEventListener("click", () => this.onOpen(row.session_id, { messageIdx: row.match.message_idx }));
    item.append(open);
    return item;
  }

  async moveOne(row) {
    const target = await this.projects.chooseTarget(`Move “${row.title || "Untitled"}” to`);
    if (target) await this.mutate(() => api.move(row.session_id, target.projectId));
  }

  closeMenus() {
    closeMenus(this.root);
    this.releaseHeld();
  }

  async mutate(call) {
    try {
      const data = await call();
      if (this.onChanged) this.onChanged(data.session);
      else this.upsert(data.session);
    } catch (err) {
      toastError(err);
    }
  }

  startRename(sessionId) {
    const node = this.root.querySelector(`.session-row[data-sid="${CSS.escape(sessionId)}"]`);
    const row = this.rows.find((r) => r.session_id === sessionId);
    if (!node || !row) return;
    this.renaming = sessionId;
    editTitleInRow(node, row.title, async (title) => {
      this.renaming = null;
      if (title) await this.mutate(() => api.rename(sessionId, title));
      this.render(); // the row again, also when the rename failed
    });
  }

  async delete(row) {
    const confirmed = await confirmAction({
      title: "Delete this session?",
      message: `“${row.title || "Untitled"}” moves to the trash; Undo brings it back for a few seconds.`,
      confirmLabel: "Delete",
    });
    if (!confirmed) return;
    let result;
    this.deleting.add(row.session_id);
    try {
      result = await api.remove(row.session_id);
    } catch (err) {
      toastError(err);
      return;
    } finally {
      this.deleting.delete(row.session_id);
    }
    this.remove(row.session_id);
    this.onDeleted?.(row.session_id);
    toast(`Deleted “${row.title || "Untitled"}”`, {
      action: "Undo",
      timeout: 10000,
      onAction: async () => {
        try {
          const restored = await api.restoreDeleted(result.undo_token);
          this.upsert(restored.session);
          toast("Session restored.");
        } catch (err) {
          toastError(err);
        }
      },
    });
  }
}

// What each turn changed, under the answer that ended it: "3 files changed" opens to the files (added,
// modified, deleted, with +/- counts), a file opens to its diff (unified or side by side), and "Restore this
// turn" puts the turn's files back as they were before it, with an Undo. The same lists serve the files
// panel's changes view. Counts come from the agent's checkpoints (GET /api/rollback/turns).

import { getJSON, postJSON } from "./api.js";
import { confirmAction } from "./dialog.js";
import { diffView } from "./diff_view.js";
import { el } from "./dom.js";
import { toast, toastError } from "./toast.js";

const STATUS_MARK = { added: "A", modified: "M", deleted: "D" };

// "1 file changed", "3 files changed".
export function filesLabel(count) {
  return `${count} file${count === 1 ? "" : "s"} changed`;
}

// The answer row a turn's changes go under: the last assistant row before the next user row.
export function answerIdx(messages, turn) {
  let found = null;
  for (const msg of messages) {
    if (msg._idx <= turn) continue;
    if (msg.role === "user") break;
    if (msg.role === "assistant" && !msg._partial) found = msg._idx;
  }
  return found;
}

function smallButton(label, onClick, kind = "") {
  const node = el("button", `btn btn-small${kind ? ` ${kind}` : ""}`, label);
  node.type = "button";
  node.addEventListener("click", onClick);
  return node;
}

function counts(row) {
  const box = el("span", "turn-counts");
  box.append(el("span", "turn-ins", `+${row.insertions}`), el("span", "turn-del", `−${row.deletions}`));
  return box;
}

export class TurnChanges {
  constructor({ list, messages, onRestored }) {
    this.list = list; // the transcript's message list
    this.messages = messages; // () → the rows the transcript holds now
    this.onRestored = onRestored; // the workspace changed under the page (the files panel reloads)
    this.sessionId = null;
    this.turns = new Map(); // turn (its user row's index) → {files_changed, insertions, deletions}
    this.seq = 0;
  }

  // Asks again which turns changed files (a session opened, a turn ended, a restore).
  async refresh(sessionId) {
    const seq = ++this.seq;
    this.sessionId = sessionId;
    if (!sessionId) {
      this.turns = new Map();
      this.decorate();
      return;
    }
    try {
      const data = await getJSON("/api/rollback/turns", { session_id: sessionId });
      if (seq !== this.seq) return;
      this.turns = new Map(data.turns.map((row) => [row.turn, row]));
    } catch {
      this.turns = new Map(); // a workspace gone or a store that cannot answer: no lists, the chat goes on
    }
    this.decorate();
  }

  // Puts each turn's summary under its answer (after any render of the rows).
  decorate() {
    const messages = this.messages();
    for (const node of this.list.querySelectorAll(".turn-changes")) {
      if (!this.turns.has(Number(node.dataset.turn))) node.remove();
    }
    for (const [turn, row] of this.turns) {
      const idx = answerIdx(messages, turn);
      const answer = idx === null ? null : this.list.querySelector(`.msg[data-idx="${idx}"]`);
      if (!answer) continue;
      const old = answer.querySelector(`:scope > .turn-changes[data-turn="${turn}"]`);
      if (old && old.dataset.count === String(row.files_changed)) continue;
      const box = this.summary(turn, row);
      if (old) old.replaceWith(box);
      else answer.append(box);
    }
  }

  summary(turn, row) {
    const box = el("details", "turn-changes");
    box.dataset.turn = String(turn);
    box.dataset.count = String(row.files_changed);
    const head = el("summary", "turn-changes-head");
    head.append(el("span", "turn-changes-label", filesLabel(row.files_changed)), counts(row));
    const body = el("div", "turn-changes-body");
    box.append(head, body);
    box.addEventListener("toggle", () => {
      if (box.open && !body.childElementCount) this.fill(body, turn);
    });
    return box;
  }

  // The turn's files, each opening its diff, and the restore.
  async fill(body, turn) {
    body.replaceChildren(el("p", "files-note", "Loading…"));
    try {
      const data = await getJSON("/api/rollback/turn", { session_id: this.sessionId, turn });
      const files = el("ul", "turn-files");
      for (const file of data.files) files.append(this.fileRow(turn, file));
      body.replaceChildren(files);
      if (data.truncated) body.append(el("p", "files-note", `Only the first ${data.files.length.toLocaleString()} files are listed.`));
      const tools = el("div", "turn-changes-tools");
      tools.append(smallButton("Restore this turn", () => this.restore(turn, data.files_changed)));
      body.append(tools);
    } catch (err) {
      body.replaceChildren(el("p", "form-error", err.message));
    }
  }

  fileRow(turn, file) {
    const item = el("li", `turn-file turn-file-${file.status}`);
    const open = el("button", "turn-file-open");
    open.type = "button";
    open.setAttribute("aria-expanded", "false");
    open.append(el("span", "turn-file-status", STATUS_MARK[file.status] || "M"), el("span", "turn-file-path", file.path));
    open.append(file.binary ? el("span", "turn-counts", "binary") : counts(file));
    open.title = `${file.status}: ${file.path}`;
    const holder = el("div", "turn-file-diff");
    open.addEventListener("click", async () => {
      if (holder.childElementCount) {
        holder.replaceChildren();
        open.setAttribute("aria-expanded", "false");
        return;
      }
      open.setAttribute("aria-expanded", "true");
      try {
        const data = await getJSON("/api/rollback/turn/diff", { session_id: this.sessionId, turn, path: file.path });
        holder.replaceChildren(diffView(data));
      } catch (err) {
        holder.replaceChildren(el("p", "form-error", err.message));
      }
    });
    item.append(open, holder);
    return item;
  }

  async restore(turn, count) {
    const sure = await confirmAction({
      title: "Restore this turn?",
      message: `The ${filesLabel(count).replace(" changed", "")} this turn changed go back to how they were before it. The state now is kept as a checkpoint, so you can undo this.`,
      confirmLabel: "Restore",
      danger: false,
    });
    if (!sure) return;
    const sid = this.sessionId;
    try {
      const done = await postJSON("/api/rollback/turn/restore", { session_id: sid, turn });
      toast(`The turn is restored (${filesLabel(done.restored).replace(" changed", "")}).`, {
        action: "Undo",
        timeout: 15000,
        onAction: async () => {
          try {
            await postJSON("/api/rollback/turn/undo", { session_id: sid, turn, undo: done.undo });
            toast("The restore is undone.");
            this.onRestored?.();
          } catch (err) {
            toastError(err);
          }
        },
      });
      this.onRestored?.();
    } catch (err) {
      toastError(err);
    }
  }

  // The files panel's list: each turn that changed files, newest first, with the user's words that began it.
  panelList() {
    const messages = this.messages();
    const box = el("div", "turn-list");
    box.append(el("h3", "files-trash-title", "Changes by turn"));
    if (!this.turns.size) box.append(el("p", "files-note", "No turn has changed files yet."));
    for (const [turn, row] of [...this.turns].reverse()) {
      const user = messages.find((msg) => msg._idx === turn);
      const words = user && typeof user.content === "string" ? user.content.trim().slice(0, 80) : `Turn ${turn}`;
      const item = el("div", "turn-list-item");
      item.append(el("p", "turn-list-words", words), this.summary(turn, row));
      box.append(item);
    }
    return box;
  }
}

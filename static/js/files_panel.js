// The files panel beside the chat (a drawer on phones): the session's workspace as a lazy tree, a preview of
// the chosen file by kind (highlighted code, Markdown, a CSV table, an image, a PDF to open, a notice for
// binary or very large files), an editor whose save refuses to overwrite a change made since it opened,
// and create, rename, delete (into a trash, restorable until emptied); a folder downloads as a zip and
// files upload into a folder by a button or a drop (files_transfer.js). It follows the agent live: a file
// the agent writes or edits appears in the tree as the tool completes, marked until it is viewed. A session
// in another execution environment (SSH, a container) shows that host's files: an edit is saved there,
// the other write tools hide, and its "Changes" are git's status and diff of the work tree there.

import { getJSON, postJSON } from "./api.js";
import { confirmAction } from "./dialog.js";
import { diffView } from "./diff_view.js";
import { button, el } from "./dom.js";
import { remoteEnvironment } from "./environment.js";
import { acceptFileDrops } from "./file_drops.js";
import { gitSection } from "./files_git.js";
import { folderDownloadLink, folderLabel, uploadButton, uploadFiles } from "./files_transfer.js";
import { toast, toastError } from "./toast.js";

// "12 B", "3.4 KB", "1.2 MB".
export function sizeLabel(bytes) {
  const size = Number(bytes) || 0;
  if (size < 1024) return `${size} B`;
  if (size < 1024 * 1024) return `${(size / 1024).toFixed(1)} KB`;
  return `${(size / (1024 * 1024)).toFixed(1)} MB`;
}

// The folder a path lies in ("" for the workspace's root) and a child's path.
export function parentOf(path) {
  const cut = path.lastIndexOf("/");
  return cut < 0 ? "" : path.slice(0, cut);
}

export function joinPath(folder, name) {
  return folder ? `${folder}/${name}` : name;
}

function rawUrl(sid, path, download = false) {
  const query = new URLSearchParams({ session_id: sid, path });
  if (download) query.set("download", "1");
  return `/api/file/raw?${query}`;
}

export class FilesPanel {
  constructor({ app, panel, toggle }) {
    this.app = app;
    this.panel = panel;
    this.toggle = toggle;
    this.sessionId = null;
    this.showHidden = false;
    this.open = new Set([""]); // expanded folders
    this.selected = null;
    this.changed = new Set(); // paths the agent wrote and the person has not viewed since
    this.workspaceRoot = null; // the folder as the server names it (the agent may give absolute paths)
    this.folder = ""; // where an upload by the button goes: the folder last opened or chosen in
    this.remote = null; // the environment's name for a session whose files are on another host
    this.panel.hidden = true;
    toggle.addEventListener("click", () => this.setOpen(this.panel.hidden));
    this.build();
  }

  build() {
    const head = el("div", "files-head");
    const title = el("h2", "files-title", "Files");
    const hidden = el("label", "check files-hidden");
    const box = el("input");
    box.type = "checkbox";
    box.addEventListener("change", () => {
      this.showHidden = box.checked;
      this.reload();
    });
    hidden.append(box, " Hidden");
    const close = el("button", "icon-btn", "×");
    close.type = "button";
    close.setAttribute("aria-label", "Close the files panel");
    close.addEventListener("click", () => this.setOpen(false));
    head.append(title, hidden, close);
    const actions = el("div", "files-actions");
    const again = button("↻", () => this.reload());
    again.setAttribute("aria-label", "Reload the files");
    const [upload, picker] = uploadButton((files) => this.upload(this.folder, files));
    this.uploadButton = upload;
    this.setFolder(this.folder);
    const trash = button("Trash", () => this.showTrash());
    actions.append(button("New file", () => this.create("file")), button("New folder", () => this.create("dir")), upload, picker, again, button("Changes", () => this.showChanges()), trash);
    this.remoteNote = el("p", "files-note files-remote-note");
    this.remoteNote.hidden = true;
    this.tree = el("div", "files-tree");
    this.tree.setAttribute("role", "tree");
    acceptFileDrops(this.tree, (files, event) => this.upload(this.dropFolder(event.target), files), {
      onOver: (event) => this.markDrop(this.dropFolder(event.target)),
      onLeave: () => this.markDrop(null),
    });
    this.preview = el("div", "files-preview");
    this.panel.replaceChildren(head, actions, this.remoteNote, this.tree, this.preview);
  }

  setOpen(open) {
    this.panel.hidden = !open;
    this.toggle.setAttribute("aria-expanded", String(open));
    document.getElementById("app").classList.toggle("files-open", open);
    if (open) this.reload();
  }

  update(session) {
    const sid = session && session.session_id && !session.read_only ? session.session_id : null;
    this.toggle.hidden = !sid;
    const remote = sid ? remoteEnvironment(session) : null;
    const moved = remote !== this.remote;
    if (moved) this.setRemote(remote);
    if (sid === this.sessionId) {
      if (moved) {
        this.selected = null;
        this.preview.replaceChildren();
        this.reload();
      }
      return;
    }
    this.sessionId = sid;
    this.open = new Set([""]);
    this.selected = null;
    this.changed = new Set();
    this.workspaceRoot = null;
    this.setFolder("");
    this.preview.replaceChildren();
    if (!sid) this.setOpen(false);
    else if (!this.panel.hidden) this.reload();
  }

  // Another host's files: every write goes there, and a note says where they are. A folder's zip and the
  // agent's checkpoints are this machine's only; its Changes are the repository's there.
  setRemote(remote) {
    this.remote = remote;
    this.remoteNote.hidden = !remote;
    this.remoteNote.textContent = remote ? `Files on ${remote}: what you create, upload, rename, edit or delete here changes them there.` : "";
  }

  // After a turn: what the agent wrote shows up (the tree and an open, unedited preview are read again).
  turnEnded() {
    if (!this.panel.hidden && this.sessionId) this.reload({ keepEditor: true });
  }

  // The agent wrote `path` (relative to the workspace): its folders open, it is marked until viewed, and the
  // tree is read again (at most once per short while however many files a turn writes).
  agentWrote(path) {
    this.changed.add(path);
    for (let folder = parentOf(path); folder; folder = parentOf(folder)) this.open.add(folder);
    if (this.panel.hidden || this.pendingReload) return;
    this.pendingReload = setTimeout(() => {
      this.pendingReload = null;
      this.reload({ keepEditor: true });
    }, 150);
  }

  async reload({ keepEditor = false } = {}) {
    const sid = this.sessionId;
    if (!sid || this.panel.hidden) return;
    try {
      const nodes = await this.folderNodes(sid, "", 0);
      if (sid !== this.sessionId) return;
      this.tree.replaceChildren(...nodes);
      if (this.selected && !(keepEditor && this.editing)) await this.show(this.selected);
    } catch (err) {
      this.tree.replaceChildren(el("p", "form-error", err.message));
    }
  }

  async folderNodes(sid, path, depth) {
    const data = await getJSON("/api/list", { session_id: sid, path, hidden: this.showHidden ? "1" : "" });
    if (typeof data.workspace === "string") this.workspaceRoot = data.workspace;
    const nodes = [];
    for (const entry of data.entries) {
      nodes.push(this.row(entry, depth));
      if (entry.type === "dir" && this.open.has(entry.path)) nodes.push(...(await this.folderNodes(sid, entry.path, depth + 1)));
    }
    if (data.truncated) {
      const note = el("p", "files-note", "Only the first 20,000 entries are listed.");
      note.dataset.under = path;
      nodes.push(note);
    }
    if (!data.entries.length && depth === 0) nodes.push(el("p", "files-note", "This workspace is empty."));
    return nodes;
  }

  // Opening a folder lists that folder alone and puts its rows under it; closing one takes its rows out.
  // Nothing else is listed or drawn again, so a folder of 10,000 entries costs its own rows only.
  async toggleFolder(entry) {
    const sid = this.sessionId;
    const opening = !this.open.has(entry.path);
    if (opening) this.open.add(entry.path);
    else this.open.delete(entry.path);
    this.setFolder(opening ? entry.path : parentOf(entry.path));
    const node = this.nodeOf(entry.path);
    if (!node) return this.reload({ keepEditor: true });
    const depth = Number(node.dataset.depth || 0);
    const mark = node.querySelector(".files-mark");
    if (mark) mark.textContent = opening ? "▾" : "▸";
    for (const below of this.nodesUnder(node, entry.path)) below.remove();
    if (opening) {
      try {
        const nodes = await this.folderNodes(sid, entry.path, depth + 1);
        if (sid !== this.sessionId || !this.open.has(entry.path) || !node.isConnected) return;
        node.after(...nodes);
      } catch (err) {
        toastError(err);
      }
    }
  }

  nodeOf(path) {
    const row = this.tree.querySelector(`.files-row[data-path="${CSS.escape(path)}"]`);
    return row?.closest(".files-item") || row;
  }

  // The rows after a folder's own that lie inside it (its listing, and its open folders' listings).
  nodesUnder(node, path) {
    const prefix = `${path}/`;
    const found = [];
    for (let next = node.nextElementSibling; next; next = next.nextElementSibling) {
      const inside = next.dataset.under;
      if (inside !== path && !(inside || "").startsWith(prefix)) break;
      found.push(next);
    }
    return found;
  }

  row(entry, depth) {
    const item = el("button", `files-row files-${entry.type}`);
    item.type = "button";
    item.setAttribute("role", "treeitem");
    item.dataset.path = entry.path;
    item.style.paddingLeft = `${8 + depth * 14}px`;
    const mark = entry.type === "dir" ? (this.open.has(entry.path) ? "▾" : "▸") : entry.type === "link" ? "↗" : "·";
    item.append(el("span", "files-mark", mark), el("span", "files-name", entry.name));
    if (entry.type === "file") item.append(el("span", "files-size", sizeLabel(entry.size)));
    const prefix = `${entry.path}/`;
    if (this.changed.has(entry.path) || (entry.type === "dir" && [...this.changed].some((p) => p.startsWith(prefix)))) {
      item.classList.add("files-changed");
      const dot = el("span", "files-dot");
      dot.title = "Changed by the agent since you looked";
      dot.setAttribute("aria-label", "changed by the agent");
      item.append(dot);
    }
    if (entry.link === "outside") item.title = "A link out of the workspace: shown, not followed";
    if (entry.type === "special") item.title = "A FIFO, socket or device: not opened";
    if (entry.path === this.selected) item.classList.add("selected");
    item.addEventListener("click", () => this.choose(entry));
    const node = entry.type === "dir" ? el("div", "files-item") : item;
    if (entry.type === "dir") node.append(item, folderDownloadLink(this.sessionId, entry));
    node.dataset.depth = String(depth);
    node.dataset.under = parentOf(entry.path);
    return node;
  }

  setFolder(path) {
    this.folder = path;
    this.uploadButton.title = `Upload files into ${folderLabel(path)} (or drop them on a folder)`;
  }

  // The folder a drop lands in: the folder under the pointer, a file's own folder, else the workspace.
  dropFolder(target) {
    const row = target?.closest?.(".files-row[data-path]");
    if (!row) return "";
    return row.classList.contains("files-dir") ? row.dataset.path : parentOf(row.dataset.path);
  }

  markDrop(folder) {
    for (const node of this.tree.querySelectorAll(".drop-folder")) node.classList.remove("drop-folder");
    if (folder) this.tree.querySelector(`.files-dir[data-path="${CSS.escape(folder)}"]`)?.classList.add("drop-folder");
  }

  async upload(folder, files) {
    const sid = this.sessionId;
    if (!sid) return;
    const stored = await uploadFiles(sid, folder, files);
    if (!stored.length || sid !== this.sessionId) return;
    if (folder) this.open.add(folder);
    this.selected = stored[stored.length - 1];
    toast(`${stored.length === 1 ? stored[0] : `${stored.length} files`} uploaded to ${folderLabel(folder)}.`);
    await this.reload();
  }

  async choose(entry) {
    if (entry.type === "dir") {
      await this.toggleFolder(entry);
      return;
    }
    if (entry.type !== "file") {
      toast(entry.link === "outside" ? "This link points out of the workspace; it is not followed." : "This is not a regular file.");
      return;
    }
    this.selected = entry.path;
    if (this.changed.delete(entry.path)) await this.reload({ keepEditor: true });
    this.setFolder(parentOf(entry.path));
    for (const node of this.tree.querySelectorAll(".files-row.selected")) node.classList.remove("selected");
    this.tree.querySelector(`[data-path="${CSS.escape(entry.path)}"]`)?.classList.add("selected");
    await this.show(entry.path);
  }

  async show(path) {
    const sid = this.sessionId;
    this.editing = false;
    try {
      const file = await getJSON("/api/file", { session_id: sid, path });
      if (sid !== this.sessionId || path !== this.selected) return;
      this.preview.replaceChildren(this.fileHead(file), this.fileBody(file));
    } catch (err) {
      this.preview.replaceChildren(el("p", "form-error", err.message));
    }
  }

  fileHead(file) {
    const head = el("div", "files-file-head");
    head.append(el("span", "files-file-name", file.path), el("span", "files-size", sizeLabel(file.size)));
    const tools = el("div", "files-file-tools");
    if (file.editable) tools.append(button("Edit", () => this.edit(file)));
    const download = el("a", "btn btn-small", "Download");
    download.href = rawUrl(this.sessionId, file.path, true);
    download.setAttribute("download", file.name);
    tools.append(download);
    tools.append(button("Rename", () => this.rename(file.path)), button("Delete", () => this.remove(file.path), "btn-danger"));
    head.append(tools);
    return head;
  }

  fileBody(file) {
    const body = el("div", `files-view files-view-${file.kind}`);
    if (file.kind === "image") {
      const image = el("img");
      image.alt = file.name;
      image.src = rawUrl(this.sessionId, file.path);
      body.append(image);
    } else if (file.kind === "pdf") {
      const link = el("a", "btn btn-small", "Open the PDF in a new tab");
      link.href = rawUrl(this.sessionId, file.path);
      link.target = "_blank";
      link.rel = "noopener";
      body.append(link);
    } else if (file.kind === "binary") {
      body.append(el("p", "files-note", "A binary file: download it to open it."));
    } else if (file.kind === "too_large") {
      body.append(el("p", "files-note", `Too large to show here (over ${sizeLabel(file.limit)}): download it to open it.`));
    } else if (file.kind === "markdown") {
      const html = el("div", "msg-body files-markdown");
      html.innerHTML = file.html; // sanitized by the server's message renderer
      body.append(html);
    } else if (file.kind === "csv") {
      const table = el("table", "files-csv");
      for (const cells of file.rows) {
        const row = el("tr");
        for (const cell of cells) row.append(el("td", null, cell));
        table.append(row);
      }
      body.append(table);
    } else {
      const pre = el("pre", "files-code highlight");
      if (file.highlighted) pre.innerHTML = file.highlighted; // Pygments' escaped output
      else pre.textContent = file.content;
      body.append(pre);
    }
    return body;
  }

  edit(file) {
    this.editing = true;
    const area = el("textarea", "files-editor");
    area.value = file.content;
    area.setAttribute("aria-label", `Edit ${file.path}`);
    let version = file.version;
    const conflict = el("div", "toolbox-conflict");
    conflict.hidden = true;
    const save = async (base) => {
      try {
        const saved = await postJSON("/api/file/save", { session_id: this.sessionId, path: file.path, content: area.value, base_version: base });
        version = saved.version;
        toast(`Saved ${file.name}.`);
        this.editing = false;
        await this.reload();
      } catch (err) {
        if (err.status !== 409 || !err.data.current) return toastError(err);
        conflict.replaceChildren(
          el("p", "toolbox-conflict-note", "This file changed since you opened it (the agent may have written to it). Nothing was saved. It now reads:"),
          el("pre", "toolbox-theirs", err.data.current.content || "(empty)"),
        );
        const actions = el("div", "toolbox-conflict-actions");
        actions.append(
          button("Use theirs", () => {
            area.value = err.data.current.content;
            version = err.data.current.version;
            conflict.hidden = true;
          }),
          button("Keep mine (replace theirs)", () => save(err.data.current.version), "btn-danger"),
        );
        conflict.append(actions);
        conflict.hidden = false;
      }
      return undefined;
    };
    const foot = el("div", "files-file-tools");
    foot.append(
      button("Cancel", () => this.show(file.path)),
      button("Save", () => save(version), "btn-primary"),
    );
    this.preview.replaceChildren(this.fileHead(file), area, conflict, foot);
    area.focus();
  }

  async create(kind) {
    const folder = this.selected ? parentOf(this.selected) : "";
    const name = window.prompt(kind === "dir" ? "New folder name" : "New file name");
    if (!name) return;
    try {
      const made = await postJSON("/api/file/create", { session_id: this.sessionId, path: joinPath(folder, name), kind });
      if (kind === "dir") this.open.add(made.path);
      else this.selected = made.path;
      await this.reload();
    } catch (err) {
      toastError(err);
    }
  }

  async rename(path) {
    const target = window.prompt("Rename or move to (a path in the workspace)", path);
    if (!target || target === path) return;
    try {
      const moved = await postJSON("/api/file/rename", { session_id: this.sessionId, path, new_path: target });
      this.selected = moved.path;
      await this.reload();
    } catch (err) {
      toastError(err);
    }
  }

  async remove(path) {
    const sure = await confirmAction({ title: "Delete this file?", message: `${path} goes to the trash; you can restore it until the trash is emptied.`, confirmLabel: "Delete" });
    if (!sure) return;
    try {
      await postJSON("/api/file/delete", { session_id: this.sessionId, path });
      this.selected = null;
      this.preview.replaceChildren();
      toast(`${path} is in the trash.`);
      await this.reload();
    } catch (err) {
      toastError(err);
    }
  }

  // Each turn's changes, the checkpoints of this workspace newest first (each one's diff to now, and a restore
  // that keeps the state before it as a checkpoint, so the toast's Undo restores that), and for a session on
  // another host its git work tree there. The checkpoints are the agent's here, the ones kept there for a
  // remote session.
  async showChanges() {
    const sid = this.sessionId;
    try {
      // Asked at once: for a remote session each is a command on its host.
      const turns = this.app.turnChanges;
      const [data, git] = await Promise.all([
        getJSON("/api/rollback/list", { session_id: sid }),
        this.remote ? gitSection(this) : null,
        turns.refresh(sid),
      ]);
      const list = el("div", "files-changes");
      list.append(turns.panelList());
      if (git) list.append(git);
      list.append(el("h3", "files-trash-title", this.remote ? `Checkpoints (kept on ${this.remote})` : "Checkpoints (the agent's)"));
      if (!data.checkpoints.length) list.append(el("p", "files-note", "No checkpoints yet: the agent takes one before it changes files."));
      for (const point of data.checkpoints) {
        const row = el("div", "files-change");
        const when = new Date(point.timestamp).toLocaleString();
        const counts = `${point.files_changed} file${point.files_changed === 1 ? "" : "s"} +${point.insertions} −${point.deletions}`;
        row.append(el("span", "files-change-when", when), el("span", "files-change-what", `${point.reason} · ${counts}`));
        const tools = el("div", "files-file-tools");
        tools.append(
          button("Diff to now", () => this.showDiff(point)),
          button("Restore", () => this.restoreTo(point)),
        );
        row.append(tools);
        list.append(row);
      }
      if (sid !== this.sessionId) return;
      this.selected = null;
      this.preview.replaceChildren(list);
    } catch (err) {
      toastError(err);
    }
  }

  async showDiff(point) {
    try {
      const data = await getJSON("/api/rollback/diff", { session_id: this.sessionId, hash: point.hash });
      const box = el("div", "files-diff");
      box.append(button("← Changes", () => this.showChanges()), el("pre", "files-stat", data.stat || "No change since this checkpoint."));
      box.append(diffView(data));
      this.preview.replaceChildren(box);
    } catch (err) {
      toastError(err);
    }
  }

  async restoreTo(point) {
    const sure = await confirmAction({
      title: "Restore this checkpoint?",
      message: "The workspace goes back to how it was then. The state now is kept as a checkpoint, so you can undo this.",
      confirmLabel: "Restore",
      danger: false,
    });
    if (!sure) return;
    try {
      const done = await postJSON("/api/rollback/restore", { session_id: this.sessionId, hash: point.hash });
      const undo = done.undo_hash;
      toast("The workspace is restored.", undo ? {
        action: "Undo",
        timeout: 15000,
        onAction: async () => {
          await postJSON("/api/rollback/restore", { session_id: this.sessionId, hash: undo });
          toast("The restore is undone.");
          await this.reload();
        },
      } : {});
      await this.reload();
      await this.showChanges();
    } catch (err) {
      toastError(err);
    }
  }

  async showTrash() {
    try {
      const data = await getJSON("/api/trash", { session_id: this.sessionId });
      const list = el("div", "files-trash");
      list.append(el("h3", "files-trash-title", "Trash"));
      if (!data.items.length) list.append(el("p", "files-note", "The trash is empty."));
      for (const item of data.items) {
        const row = el("div", "files-trash-row");
        row.append(
          el("span", "files-name", item.path),
          button("Restore", async () => {
            try {
              await postJSON("/api/trash/restore", { session_id: this.sessionId, trash_id: item.trash_id });
              toast(`${item.path} is back.`);
              await this.reload();
              await this.showTrash();
            } catch (err) {
              toastError(err);
            }
          }),
        );
        list.append(row);
      }
      if (data.items.length) {
        list.append(
          button("Empty the trash", async () => {
            if (!(await confirmAction({ title: "Empty the trash?", message: "Its files are deleted for good.", confirmLabel: "Empty" }))) return;
            await postJSON("/api/trash/empty", { session_id: this.sessionId });
            await this.showTrash();
          }, "btn-danger"),
        );
      }
      this.selected = null;
      this.preview.replaceChildren(list);
    } catch (err) {
      toastError(err);
    }
  }
}

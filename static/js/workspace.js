// The session's workspace in the header: the folder its terminal and file tools work in, and a picker
// (recently used workspaces, or a typed path). The server decides what may be chosen and says why not.

import { getJSON, postJSON } from "./api.js";
import { el, pathIcon } from "./dom.js";
import { remoteEnvironment as remoteOf } from "./environment.js";

// A session in a remote environment works in a folder on that host (its login's home until one is chosen).
function folderOf(session) {
  return remoteOf(session) ? session.environment_workspace || "~" : session.workspace;
}

export const workspaceApi = {
  overview: () => getJSON("/api/workspaces"),
  set: (sessionId, workspace) => postJSON("/api/session/workspace", { session_id: sessionId, workspace }),
};

function folderIcon() {
  return pathIcon("workspace-icon", "M1.5 3.5h4.5l1.5 1.5h7v8h-13z");
}

function folderName(path) {
  const parts = String(path || "").split(/[\\/]+/).filter(Boolean);
  return parts.length ? parts[parts.length - 1] : path || "/";
}

export class WorkspacePicker {
  constructor({ root, onChanged }) {
    this.root = root;
    this.onChanged = onChanged;
    this.session = null;
    this.stale = false; // a change to show once the menu closes
    this.root.classList.add("workspace");
    this.summary = el("summary", "btn btn-small workspace-current");
    this.summary.setAttribute("aria-label", "Workspace");
    this.label = el("span", "workspace-label");
    this.summary.append(folderIcon(), this.label);
    this.menu = el("div", "workspace-menu");
    this.path = el("p", "workspace-path");
    this.recent = el("ul", "workspace-recent");
    this.recent.setAttribute("aria-label", "Recent workspaces");
    this.form = el("form", "workspace-form");
    this.input = document.createElement("input");
    this.input.type = "text";
    this.input.name = "workspace";
    this.input.placeholder = "/path/to/folder or ~/folder";
    this.input.autocomplete = "off";
    this.input.spellcheck = false;
    this.input.setAttribute("aria-label", "Folder path");
    const use = el("button", "btn btn-small btn-primary", "Use");
    use.type = "submit";
    this.form.append(this.input, use);
    this.error = el("p", "form-error workspace-error");
    this.error.setAttribute("role", "alert");
    this.error.hidden = true;
    this.menu.append(
      el("p", "workspace-heading", "Working folder for this session's tools"),
      this.path,
      el("p", "workspace-heading", "Recent"),
      this.recent,
      this.form,
      this.error,
    );
    this.root.append(this.summary, this.menu);
    this.root.addEventListener("toggle", () => {
      if (this.root.open) this.refresh();
      else if (this.stale) this.setSession(this.session);
    });
    this.form.addEventListener("submit", (event) => {
      event.preventDefault();
      const value = this.input.value.trim();
      if (value) this.choose(value);
    });
    document.addEventListener("click", (event) => {
      if (this.root.open && !this.root.contains(event.target)) this.root.open = false;
    });
    this.root.addEventListener("keydown", (event) => {
      if (event.key === "Escape" && this.root.open) {
        this.root.open = false;
        this.summary.focus();
      }
    });
  }

  // A change of the same session while the person has the menu open is shown when it closes: the open
  // menu (its path, the folders offered) stays as it was when they opened it.
  setSession(session) {
    const sid = session && (session.session_id || session.id);
    const shown = this.session && (this.session.session_id || this.session.id);
    this.session = session;
    this.stale = Boolean(sid && sid === shown && this.root.open);
    if (this.stale) return;
    this.root.hidden = !sid || Boolean(session.read_only) || !session.workspace;
    if (this.root.hidden) {
      this.root.open = false;
      return;
    }
    const folder = folderOf(session);
    this.label.textContent = folderName(folder);
    const remote = remoteOf(session);
    this.summary.title = remote ? `Workspace on ${remote}: ${folder}` : `Workspace: ${folder}`;
    this.path.textContent = remote ? `${folder} (on ${remote})` : folder;
  }

  showError(message) {
    this.error.textContent = message || "";
    this.error.hidden = !message;
  }

  async refresh() {
    this.showError("");
    let data;
    try {
      data = await workspaceApi.overview();
    } catch (err) {
      this.showError(err.message);
      return;
    }
    const remote = remoteOf(this.session);
    if (remote) {
      // This machine's folders mean nothing on the other host: a folder there is typed, and checked there.
      this.recent.replaceChildren(el("li", "workspace-none", `Type a folder on ${remote}.`));
      return;
    }
    const current = this.session?.workspace;
    const folders = [...new Set([...(data.recent || []), data.default].filter(Boolean))].filter((f) => f !== current);
    this.recent.replaceChildren(
      ...folders.map((folder) => {
        const item = el("li");
        const button = el("button", "link-btn workspace-option", folder);
        button.type = "button";
        button.addEventListener("click", () => this.choose(folder));
        item.append(button);
        return item;
      }),
    );
    if (!folders.length) this.recent.append(el("li", "workspace-none", "No other workspaces yet."));
  }

  async choose(folder) {
    const sid = this.session && (this.session.session_id || this.session.id);
    if (!sid) return;
    this.showError("");
    try {
      const { session: row } = await workspaceApi.set(sid, folder);
      this.input.value = "";
      this.root.open = false;
      this.onChanged?.(row); // comes back through setSession(), as the newest of this choice and the feed
    } catch (err) {
      this.showError(err.message);
      this.input.focus();
    }
  }
}

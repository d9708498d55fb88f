// The session's execution environment in the header, beside its workspace: where its terminal and file tools
// run (local, or a named SSH host, Docker image...). The menu lists the environments, tests each ("Test
// connection"), adds or removes one, and before a remote environment is first used says what the agent
// copies there and asks the person once (the server remembers it per target).

import { getJSON, postJSON } from "./api.js";
import { ask, confirmAction } from "./dialog.js";
import { el, pathIcon } from "./dom.js";

// The environment of a session whose files and commands are on another host, or null for a local one.
export function remoteEnvironment(session) {
  return session?.environment && session.environment !== "local" ? session.environment : null;
}

export const environmentApi = {
  list: () => getJSON("/api/environments"),
  save: (body) => postJSON("/api/environments", body),
  copies: (name) => getJSON("/api/environments/copies", { name }),
  confirm: (name) => postJSON("/api/environments/confirm", { name }),
  test: (name) => postJSON("/api/environments/test", { name }),
  set: (sessionId, environment) => postJSON("/api/session/environment", { session_id: sessionId, environment }),
};

const FIELDS = {
  ssh: [
    ["ssh_host", "Host", "Host, e.g. build.example.org"],
    ["ssh_user", "User", "User on that host"],
    ["ssh_port", "Port", "Port (22)"],
    ["ssh_key", "Key file", "Key file (empty: default keys)"],
  ],
  docker: [["docker_image", "Image", "Image, e.g. python:3.11-slim"]],
  modal: [["modal_image", "Image", "Image, e.g. python:3.11"]],
  daytona: [["daytona_image", "Image", "Image, e.g. python:3.11"]],
  singularity: [["singularity_image", "Image", "Image, e.g. docker://python:3.11-slim"]],
};

function hostIcon() {
  return pathIcon("workspace-icon", "M2 3.5h12v7H2zM5.5 13.5h5M8 10.5v3");
}

function sessionIdOf(session) {
  return session && (session.session_id || session.id);
}

// What the confirmation lists: the agent's own file sync, as the server read it.
function copiesBody(copies) {
  const body = el("div", "environment-copies");
  const list = el("ul", "environment-copies-list");
  const credentials = copies.credential_files || [];
  list.append(
    el("li", "", credentials.length ? `Credential files: ${credentials.join(", ")}` : "Credential files the agent or a skill registers (none registered now)"),
    el("li", "", `${copies.skill_files || 0} skill file${copies.skill_files === 1 ? "" : "s"}`),
    el("li", "", `${copies.cache_files || 0} cached file${copies.cache_files === 1 ? "" : "s"}`),
  );
  body.append(
    el("p", "modal-message", `Before its first command there, the agent's ${copies.backend} backend copies to ${copies.destination} on ${copies.target}:`),
    list,
    el("p", "modal-message", "The commands this session's agent runs there run as that user, with those files. You are asked once for this target."),
  );
  return body;
}

export async function confirmEnvironment(name) {
  const copies = await environmentApi.copies(name);
  if (!copies.remote) return true;
  const answer = await ask({
    title: `Use ${name} (${copies.target})?`,
    body: copiesBody(copies),
    buttons: [{ label: "Copy and use", value: "yes", kind: "primary" }],
  });
  if (answer !== "yes") return false;
  await environmentApi.confirm(name);
  return true;
}

// Runs ``action``; a remote environment not yet confirmed asks the person first, then runs it again.
async function withConfirmation(name, action) {
  try {
    return await action();
  } catch (err) {
    if (err?.data?.needs_confirmation !== name) throw err;
    if (!(await confirmEnvironment(name))) return null;
    return action();
  }
}

function resultText(answer) {
  if (answer.ok) return `✓ ${answer.host} · ${answer.cwd} · ${answer.elapsed_ms} ms`;
  return `✗ ${answer.error}${answer.fix ? ` — ${answer.fix}` : ""}`;
}

export class EnvironmentPicker {
  constructor({ root, onChanged }) {
    this.root = root;
    this.onChanged = onChanged;
    this.session = null;
    this.rows = [];
    this.results = new Map(); // the last test's answer per environment, kept while the list is redrawn
    this.root.classList.add("workspace", "environment");
    this.summary = el("summary", "btn btn-small workspace-current");
    this.summary.setAttribute("aria-label", "Execution environment");
    this.label = el("span", "workspace-label");
    this.summary.append(hostIcon(), this.label);
    this.menu = el("div", "workspace-menu environment-menu");
    this.list = el("ul", "environment-list");
    this.list.setAttribute("aria-label", "Environments");
    this.error = el("p", "form-error workspace-error");
    this.error.setAttribute("role", "alert");
    this.error.hidden = true;
    this.note = el("p", "environment-note", "The agent's commands and file tools run there, in a process of their own; the files panel reads that host.");
    this.note.hidden = true;
    this.menu.append(el("p", "workspace-heading", "Where this session's commands run"), this.list, this.note, this.buildForm(), this.error);
    this.root.append(this.summary, this.menu);
    // On a narrow header the picker's own button gives its room to the others: this line, which the page
    // puts in the workspace menu, opens it instead.
    this.shortcut = el("button", "link-btn environment-shortcut");
    this.shortcut.type = "button";
    this.shortcut.addEventListener("click", (event) => {
      event.stopPropagation();
      this.shortcut.closest("details")?.removeAttribute("open");
      this.root.open = true;
    });
    this.root.addEventListener("toggle", () => {
      if (this.root.open) this.refresh();
    });
    document.addEventListener("click", (event) => {
      if (this.root.open && !this.root.contains(event.target) && !event.target.closest?.("dialog")) this.root.open = false;
    });
    this.root.addEventListener("keydown", (event) => {
      if (event.key === "Escape" && this.root.open && !document.querySelector("dialog[open]")) {
        this.root.open = false;
        this.summary.focus();
      }
    });
  }

  buildForm() {
    const adder = el("details", "environment-add");
    adder.append(el("summary", "link-btn", "Add or change an environment…"));
    const form = el("form", "environment-form");
    this.nameInput = this.input("name", "Name", "Name, e.g. gpu-box");
    this.backend = document.createElement("select");
    this.backend.name = "backend";
    this.backend.setAttribute("aria-label", "Backend");
    for (const kind of Object.keys(FIELDS)) this.backend.append(new Option(kind, kind));
    this.fields = el("div", "environment-fields");
    this.backend.addEventListener("change", () => this.showFields());
    const save = el("button", "btn btn-small btn-primary", "Save");
    save.type = "submit";
    form.append(this.nameInput, this.backend, this.fields, save);
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      this.save();
    });
    adder.append(form);
    this.showFields();
    return adder;
  }

  input(name, label, placeholder) {
    const input = document.createElement("input");
    input.type = "text";
    input.name = name;
    input.placeholder = placeholder;
    input.autocomplete = "off";
    input.spellcheck = false;
    input.setAttribute("aria-label", label);
    return input;
  }

  showFields() {
    this.fields.replaceChildren(...FIELDS[this.backend.value].map(([name, label, placeholder]) => this.input(name, label, placeholder)));
  }

  setSession(session) {
    this.session = session;
    const sid = sessionIdOf(session);
    this.root.hidden = !sid || Boolean(session.read_only);
    if (this.root.hidden) {
      this.root.open = false;
      return;
    }
    const name = session.environment || "local";
    this.label.textContent = name;
    this.shortcut.textContent = `Commands run in: ${name} — change`;
    this.summary.title = `Environment: ${name}`;
    this.summary.classList.toggle("environment-remote", name !== "local");
    this.note.hidden = name === "local";
    if (this.root.open) this.render();
  }

  showError(message) {
    this.error.textContent = message || "";
    this.error.hidden = !message;
  }

  async refresh() {
    this.showError("");
    try {
      this.rows = (await environmentApi.list()).environments || [];
    } catch (err) {
      this.showError(err.message);
      return;
    }
    this.render();
  }

  render() {
    const current = this.session?.environment || "local";
    this.list.replaceChildren(
      ...this.rows.map((row) => {
        const item = el("li", `environment-row${row.name === current ? " environment-current" : ""}`);
        const pick = el("button", "link-btn environment-option");
        pick.type = "button";
        pick.setAttribute("aria-pressed", String(row.name === current));
        pick.append(el("span", "environment-name", row.name), el("span", "environment-target", row.remote ? row.target : "this machine"));
        pick.addEventListener("click", () => this.choose(row.name));
        const test = el("button", "btn btn-small", "Test");
        test.type = "button";
        test.setAttribute("aria-label", `Test connection to ${row.name}`);
        const result = el("p", "environment-result");
        result.setAttribute("role", "status");
        this.showResult(result, this.results.get(row.name) || (row.error ? { ok: false, error: row.error } : null));
        test.addEventListener("click", () => this.test(row.name, test, result));
        item.append(pick, test);
        if (row.remote) {
          const remove = el("button", "icon-btn environment-remove", "×");
          remove.type = "button";
          remove.title = `Remove ${row.name}`;
          remove.setAttribute("aria-label", `Remove ${row.name}`);
          remove.addEventListener("click", () => this.remove(row.name));
          item.append(remove);
        }
        item.append(result);
        return item;
      }),
    );
  }

  showResult(node, answer) {
    node.hidden = !answer;
    node.className = "environment-result";
    if (!answer) return;
    node.textContent = answer.pending ? "Testing…" : resultText(answer);
    if (!answer.pending) node.classList.add(answer.ok ? "environment-ok" : "environment-failed");
  }

  async test(name, button, result) {
    this.showError("");
    button.disabled = true;
    this.showResult(result, { pending: true });
    let answer;
    try {
      answer = await withConfirmation(name, () => environmentApi.test(name));
    } catch (err) {
      answer = { ok: false, error: err.message };
    } finally {
      button.disabled = false;
    }
    if (answer) this.results.set(name, answer);
    else this.results.delete(name);
    this.showResult(result, answer);
  }

  async choose(name) {
    const sid = sessionIdOf(this.session);
    if (!sid) return;
    this.showError("");
    try {
      const answer = await withConfirmation(name, () => environmentApi.set(sid, name));
      if (!answer) return;
      this.root.open = false;
      this.onChanged?.(answer.session);
    } catch (err) {
      this.showError(err.message);
    }
  }

  async save() {
    this.showError("");
    const body = { name: this.nameInput.value.trim(), backend: this.backend.value };
    for (const input of this.fields.querySelectorAll("input")) {
      if (input.value.trim()) body[input.name] = input.value.trim();
    }
    try {
      this.rows = (await environmentApi.save(body)).environments || [];
      this.nameInput.value = "";
      this.showFields();
      this.render();
    } catch (err) {
      this.showError(err.message);
    }
  }

  async remove(name) {
    this.showError("");
    const sure = await confirmAction({ title: `Remove ${name}?`, message: "Sessions that use it can no longer run their turns until they choose another environment.", confirmLabel: "Remove" });
    if (!sure) return;
    try {
      this.rows = (await environmentApi.save({ name, delete: true })).environments || [];
      this.render();
    } catch (err) {
      this.showError(err.message);
    }
  }
}

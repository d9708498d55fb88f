// The agent's toolbox, opened from the sidebar: its memory (MEMORY.md, USER.md, SOUL.md, edited with a save
// that refuses to overwrite what the agent wrote meanwhile), its skills (on or off, read, the person's own
// edited), the MCP servers with their state and tools, the agent's cron jobs, and the settings a person
// changes often.

import { getJSON, postJSON } from "./api.js";
import { el } from "./dom.js";
import { toast, toastError } from "./toast.js";
import { mcpStateText } from "./tools.js";
import { cronTab } from "./cron_panel.js";

const TABS = [
  ["memory", "Memory"],
  ["skills", "Skills"],
  ["mcp", "MCP servers"],
  ["cron", "Cron jobs"],
  ["settings", "Settings"],
];

const SETTING_LABELS = {
  default_model: "Model for new sessions",
  agent_toolsets: "Toolsets the agent may use",
  approval_timeout: "Seconds an approval waits",
  clarify_timeout: "Seconds a question waits",
  default_workspace: "Workspace of new sessions",
  workspace_roots: "Folders workspaces may be under",
  remote_images: "Show images answers link to",
};

// One setting's input, with its help; a setting the environment decides is shown but not editable.
function settingField(row) {
  const field = el("div", "toolbox-setting");
  const id = `setting-${row.name}`;
  const label = el("label", "toolbox-setting-label", SETTING_LABELS[row.name] || row.name);
  label.htmlFor = id;
  let input;
  if (row.type === "bool") {
    input = el("input");
    input.type = "checkbox";
    input.checked = Boolean(row.value);
  } else {
    input = el("input", "toolbox-input");
    input.type = row.type === "int" || row.type === "float" ? "number" : "text";
    if (row.minimum !== null) input.min = String(row.minimum);
    if (row.maximum !== null) input.max = String(row.maximum);
    if (row.type === "float") input.step = "any";
    input.value = row.value ?? "";
  }
  input.id = id;
  input.name = row.name;
  input.disabled = Boolean(row.locked_by);
  const help = el("p", "toolbox-muted", row.help);
  if (row.locked_by) help.append(` Set by ${row.locked_by} in the environment, which wins over config.yaml.`);
  field.append(label, input, help);
  return field;
}

function settingValue(input) {
  return input.type === "checkbox" ? input.checked : input.value;
}

async function settingsTab(pane) {
  const data = await getJSON("/api/settings");
  const box = el("div", "toolbox-pane");
  const form = el("form", "toolbox-settings");
  form.noValidate = true;
  const initial = {};
  for (const row of data.settings) {
    form.append(settingField(row));
    initial[row.name] = row.value;
  }
  const error = el("p", "form-error");
  error.setAttribute("role", "alert");
  const save = el("button", "btn btn-primary", "Save settings");
  save.type = "submit";
  const foot = el("div", "toolbox-file-foot");
  foot.append(el("span", "toolbox-muted", "Saved under webui: in the agent's config.yaml; in force at once."), save);
  form.append(error, foot);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const changes = {};
    for (const input of form.querySelectorAll("input[name]")) {
      if (input.disabled) continue;
      const value = settingValue(input);
      if (String(value) !== String(initial[input.name] ?? "")) changes[input.name] = value;
    }
    if (!Object.keys(changes).length) {
      toast("Nothing changed.");
      return;
    }
    try {
      await postJSON("/api/settings", { settings: changes });
      error.textContent = "";
      toast("Settings saved.");
      showTab(pane, "settings");
    } catch (err) {
      error.textContent = err.message;
    }
  });
  box.append(form);
  return box;
}

// "123 / 2,200 characters", or just the count where the agent sets no limit.
export function charCount(text, limit) {
  const used = String(text).trim().length;
  return limit ? `${used.toLocaleString("en")} / ${limit.toLocaleString("en")} characters` : `${used.toLocaleString("en")} characters`;
}

function button(label, kind, onClick) {
  const node = el("button", `btn btn-small${kind ? ` ${kind}` : ""}`, label);
  node.type = "button";
  node.addEventListener("click", onClick);
  return node;
}

// A text saved against the version it was read at; a 409 shows the other text and lets the person choose.
class VersionedEditor {
  constructor({ title, hint, text, version, limit, readOnly, save }) {
    Object.assign(this, { version, limit, save });
    this.root = el("section", "toolbox-file");
    const head = el("div", "toolbox-file-head");
    head.append(el("h3", "toolbox-file-title", title));
    if (hint) head.append(el("span", "toolbox-muted", hint));
    this.area = el("textarea", "toolbox-text");
    this.area.value = text;
    this.area.readOnly = Boolean(readOnly);
    this.area.setAttribute("aria-label", title);
    this.count = el("span", "toolbox-muted", charCount(text, limit));
    this.area.addEventListener("input", () => {
      this.count.textContent = charCount(this.area.value, limit);
      this.count.classList.toggle("over", Boolean(limit) && this.area.value.trim().length > limit);
    });
    this.conflict = el("div", "toolbox-conflict");
    this.conflict.hidden = true;
    const foot = el("div", "toolbox-file-foot");
    foot.append(this.count);
    if (!readOnly) foot.append(button("Save", "btn-primary", () => this.store(this.version)));
    this.root.append(head, this.area, this.conflict, foot);
  }

  async store(base) {
    try {
      const saved = await this.save(this.area.value, base);
      this.version = saved.version;
      this.conflict.hidden = true;
      toast("Saved.");
    } catch (err) {
      if (err.status === 409 && err.data.current) this.showConflict(err.data.current);
      else toastError(err);
    }
  }

  showConflict(current) {
    const theirs = el("pre", "toolbox-theirs", current.content || "(empty)");
    const keep = button("Keep mine (replace theirs)", "btn-danger", () => this.store(current.version));
    const take = button("Use theirs", "", () => {
      this.area.value = current.content;
      this.version = current.version;
      this.area.dispatchEvent(new Event("input"));
      this.conflict.hidden = true;
    });
    this.conflict.replaceChildren(
      el("p", "toolbox-conflict-note", "This changed since you opened it (the agent may have written to it). Nothing was saved. The text now:"),
      theirs,
      el("div", "toolbox-conflict-actions"),
    );
    this.conflict.lastChild.append(take, keep);
    this.conflict.hidden = false;
  }
}

async function memoryTab() {
  const data = await getJSON("/api/memory");
  const box = el("div", "toolbox-pane");
  box.append(el("p", "toolbox-muted", "What the agent remembers across sessions. It reads these at the start of each session."));
  for (const file of data.files) {
    const editor = new VersionedEditor({
      title: file.name,
      hint: file.label,
      text: file.content,
      version: file.version,
      limit: file.limit,
      save: async (content, base) => (await postJSON("/api/memory/write", { target: file.target, content, base_version: base })).file,
    });
    box.append(editor.root);
  }
  return box;
}

function skillRow(skill, openSkill) {
  const row = el("div", "toolbox-row");
  const toggle = el("input");
  toggle.type = "checkbox";
  toggle.checked = skill.enabled;
  toggle.setAttribute("aria-label", `Use the skill ${skill.name}`);
  toggle.addEventListener("change", async () => {
    try {
      await postJSON("/api/skills/toggle", { name: skill.name, enabled: toggle.checked });
      toast(`${skill.name} is ${toggle.checked ? "on" : "off"}.`);
    } catch (err) {
      toggle.checked = !toggle.checked;
      toastError(err);
    }
  });
  const text = el("div", "toolbox-row-text");
  const name = el("div", "toolbox-row-name", skill.name);
  name.append(el("span", `toolbox-badge toolbox-badge-${skill.source}`, skill.source === "local" ? "yours" : skill.source));
  text.append(name, el("div", "toolbox-muted", skill.description), el("div", "toolbox-command", skill.command));
  row.append(toggle, text, button(skill.editable ? "Edit" : "View", "", () => openSkill(skill)));
  return row;
}

async function skillsTab(pane) {
  const data = await getJSON("/api/skills");
  const box = el("div", "toolbox-pane");
  if (!data.skills.length) {
    box.append(el("p", "toolbox-muted", "No skills installed. The agent's skills live in its skills folder; hermes skills installs more."));
    return box;
  }
  const list = el("div", "toolbox-list");
  const openSkill = async (skill) => {
    try {
      const full = (await getJSON("/api/skills/view", { name: skill.name })).skill;
      const editor = new VersionedEditor({
        title: full.name,
        hint: full.editable ? "Your skill (SKILL.md)" : `From the agent's ${full.source} skills (read only)`,
        text: full.content,
        version: full.version,
        readOnly: !full.editable,
        save: async (content, base) => (await postJSON("/api/skills/save", { name: full.name, content, base_version: base })).skill,
      });
      pane.replaceChildren(button("← All skills", "", () => showTab(pane, "skills")), editor.root);
    } catch (err) {
      toastError(err);
    }
  };
  for (const skill of data.skills) list.append(skillRow(skill, openSkill));
  box.append(el("p", "toolbox-muted", "Switched-off skills are hidden from the agent. Type / and a skill's name to use it."), list);
  return box;
}

async function mcpTab(pane) {
  const data = await getJSON("/api/mcp/tools");
  const box = el("div", "toolbox-pane");
  const reconnect = button("Reconnect all", "toolbox-nowrap", async () => {
    try {
      await postJSON("/api/mcp/reload", {});
      toast("Reconnecting the MCP servers…");
      setTimeout(() => showTab(pane, "mcp"), 1500);
    } catch (err) {
      toastError(err);
    }
  });
  const head = el("div", "toolbox-pane-head");
  head.append(el("p", "toolbox-muted", "The mcp_servers of the agent's config.yaml. Each server's tools are a toolset in the Tools menu."), reconnect);
  box.append(head);
  if (!data.servers.length) box.append(el("p", "toolbox-muted", "No MCP servers are configured."));
  for (const server of data.servers) {
    const row = el("section", "toolbox-server");
    const name = el("div", "toolbox-row-name", server.name);
    name.append(el("span", "toolbox-badge", server.transport));
    const state = el("div", `toolset-mcp toolset-mcp-${server.status}`, mcpStateText(server));
    row.append(name, state);
    if (server.tool_list.length) {
      const tools = el("ul", "toolbox-tools");
      for (const tool of server.tool_list) {
        const item = el("li");
        item.append(el("code", null, tool.name), el("span", "toolbox-muted", ` ${tool.description}`));
        tools.append(item);
      }
      row.append(tools);
    }
    box.append(row);
  }
  return box;
}

const BUILDERS = {
  memory: memoryTab,
  skills: skillsTab,
  mcp: mcpTab,
  cron: (pane) => cronTab(pane, () => showTab(pane, "cron")),
  settings: settingsTab,
};

async function showTab(pane, name) {
  pane.dataset.tab = name;
  pane.replaceChildren(el("p", "toolbox-muted", "Loading…"));
  try {
    const content = await BUILDERS[name](pane);
    if (pane.dataset.tab === name) pane.replaceChildren(content);
  } catch (err) {
    pane.replaceChildren(el("p", "form-error", err.message));
  }
}

export function openToolbox(tab = "memory") {
  const dialog = el("dialog", "toolbox");
  dialog.setAttribute("aria-label", "The agent's memory, skills, MCP servers and cron jobs");
  const head = el("div", "toolbox-head");
  const tabs = el("div", "toolbox-tabs");
  tabs.setAttribute("role", "tablist");
  const pane = el("div", "toolbox-body");
  pane.setAttribute("role", "tabpanel");
  const select = (name) => {
    for (const node of tabs.children) node.setAttribute("aria-selected", String(node.dataset.tab === name));
    showTab(pane, name);
  };
  for (const [name, label] of TABS) {
    const node = el("button", "toolbox-tab", label);
    node.type = "button";
    node.dataset.tab = name;
    node.setAttribute("role", "tab");
    node.addEventListener("click", () => select(name));
    tabs.append(node);
  }
  const close = el("button", "icon-btn", "×");
  close.type = "button";
  close.setAttribute("aria-label", "Close");
  close.addEventListener("click", () => dialog.close());
  head.append(el("h2", "toolbox-title", "Agent"), tabs, close);
  dialog.append(head, pane);
  dialog.addEventListener("close", () => dialog.remove());
  document.body.append(dialog);
  dialog.showModal();
  select(tab);
  return dialog;
}

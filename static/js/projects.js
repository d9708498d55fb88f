// The sidebar's projects: the list with colour dots ("All sessions" first), choosing one shows its
// sessions only; create, rename, recolour and delete (its sessions move out, never away); the dialog that
// picks a project to move sessions into; session rows dropped on a project (or on "All sessions": out).

import { api } from "./api.js";
import { ask, confirmAction } from "./dialog.js";
import { el } from "./dom.js";
import { closeMenus, rowMenu } from "./row_menu.js";
import { toast, toastError } from "./toast.js";

const COLOUR_NAMES = {
  "#e5484d": "Red",
  "#f76b15": "Orange",
  "#ffc53d": "Yellow",
  "#30a46c": "Green",
  "#12a594": "Teal",
  "#0090ff": "Blue",
  "#6e56cf": "Purple",
  "#d6409f": "Pink",
  "#8d8d8d": "Grey",
};

// The drag's data: the ids of the sessions dragged, as JSON.
const RELOAD_MS = 5000;

export const DRAG_TYPE = "application/x-talaria-sessions";

export function colourDot(color, label) {
  const dot = el("span", "project-dot");
  dot.style.setProperty("--dot", color || "var(--muted)");
  if (label) {
    dot.setAttribute("role", "img");
    dot.setAttribute("aria-label", label);
  } else {
    dot.setAttribute("aria-hidden", "true");
  }
  return dot;
}

export class ProjectPanel {
  constructor({ root, onView, onDrop }) {
    this.root = root;
    this.onView = onView;
    this.onDrop = onDrop; // (session ids, project or null)
    this.projects = [];
    this.palette = Object.keys(COLOUR_NAMES);
    this.current = null; // the project shown, null: all sessions
    this.lastLoad = 0;
    this.asked = new Set(); // unknown project ids the list was read again for
    document.addEventListener("click", (event) => {
      if (!event.target.closest(".project-actions")) closeMenus(this.root);
    });
    // Another tab may have changed the projects: the list is read again when this one comes back.
    document.addEventListener("visibilitychange", () => {
      if (document.visibilityState === "visible") this.load();
    });
  }

  async load() {
    this.lastLoad = Date.now();
    try {
      const data = await api.projects();
      this.projects = Array.isArray(data.projects) ? data.projects : [];
      if (Array.isArray(data.palette) && data.palette.length) this.palette = data.palette;
    } catch (err) {
      toastError(err);
    }
    if (this.current && !this.find(this.current)) this.view(null);
    this.render();
  }

  find(projectId) {
    return (projectId && this.projects.find((p) => p.project_id === projectId)) || null;
  }

  // A session names a project this tab does not know (made in another tab): the list is read again, once
  // per such project and at most every few seconds.
  noteUnknown(projectId) {
    if (!projectId || this.find(projectId) || this.asked.has(projectId)) return;
    if (Date.now() - this.lastLoad < RELOAD_MS) return;
    this.asked.add(projectId);
    this.load().then(() => this.onView(this.current, { refresh: false }));
  }

  view(projectId) {
    this.current = projectId || null;
    this.render();
    this.onView(this.current);
  }

  render() {
    const head = el("div", "projects-head");
    head.append(el("h2", "group-title projects-title", "Projects"));
    const add = el("button", "icon-btn project-add", "+");
    add.type = "button";
    add.setAttribute("aria-label", "New project");
    add.title = "New project";
    add.addEventListener("click", () => this.create());
    head.append(add);
    const list = el("ul", "project-list");
    list.append(this.renderItem(null, "All sessions", null));
    for (const project of this.projects) list.append(this.renderItem(project.project_id, project.name, project));
    this.root.replaceChildren(head, list);
  }

  renderItem(projectId, name, project) {
    const item = el("li", "project-row");
    if (projectId) item.dataset.projectId = projectId;
    const open = el("button", "project-open");
    open.type = "button";
    if (project) open.append(colourDot(project.color));
    open.append(el("span", "project-name", name));
    if (this.current === projectId) {
      item.classList.add("active");
      open.setAttribute("aria-current", "true");
    }
    open.addEventListener("click", () => this.view(projectId));
    this.acceptDrops(item, project);
    item.append(open);
    if (project) item.append(this.renderActions(project));
    return item;
  }

  acceptDrops(item, project) {
    item.addEventListener("dragover", (event) => {
      if (!event.dataTransfer.types.includes(DRAG_TYPE)) return;
      event.preventDefault();
      event.dataTransfer.dropEffect = "move";
      item.classList.add("drop-target");
    });
    item.addEventListener("dragleave", () => item.classList.remove("drop-target"));
    item.addEventListener("drop", (event) => {
      item.classList.remove("drop-target");
      let ids;
      try {
        ids = JSON.parse(event.dataTransfer.getData(DRAG_TYPE));
      } catch {
        return;
      }
      event.preventDefault();
      if (Array.isArray(ids) && ids.length) this.onDrop(ids, project);
    });
  }

  renderActions(project) {
    const entries = [
      ["Rename or recolour", () => this.edit(project)],
      ["Delete project", () => this.remove(project)],
    ];
    return rowMenu("project-actions", `Actions for project ${project.name}`, entries, () => closeMenus(this.root));
  }

  // A name field and the palette as radio buttons; the answer is {name, color} or null.
  async askDetails(title, confirmLabel, { name = "", color } = {}) {
    const body = el("div", "project-form");
    const label = el("label", "project-field", "Name");
    const input = el("input", "project-name-input");
    input.maxLength = 100;
    input.value = name;
    input.autocomplete = "off";
    label.append(input);
    const colours = el("fieldset", "project-colours");
    colours.append(el("legend", null, "Colour"));
    const chosen = color || this.palette[0];
    for (const value of this.palette) {
      const option = el("label", "colour-option");
      const radio = el("input");
      radio.type = "radio";
      radio.name = "project-colour";
      radio.value = value;
      radio.checked = value === chosen;
      radio.setAttribute("aria-label", COLOUR_NAMES[value] || value);
      option.append(radio, colourDot(value));
      colours.append(option);
    }
    body.append(label, colours);
    input.addEventListener("keydown", (event) => {
      if (event.key === "Enter") {
        event.preventDefault();
        body.closest("dialog")?.querySelector(".modal-buttons .btn-primary")?.click();
      }
    });
    queueMicrotask(() => input.focus());
    const answer = await ask({ title, body, buttons: [{ label: confirmLabel, value: "ok" }] });
    if (answer !== "ok") return null;
    const picked = body.querySelector("input[name=project-colour]:checked");
    return { name: input.value.trim(), color: picked ? picked.value : chosen };
  }

  async create() {
    const details = await this.askDetails("New project", "Create");
    if (!details) return;
    try {
      const data = await api.createProject(details.name, details.color);
      this.projects.push(data.project);
      this.render();
      toast(`Project “${data.project.name}” created.`);
    } catch (err) {
      toastError(err);
    }
  }

  async edit(project) {
    const details = await this.askDetails("Edit project", "Save", project);
    if (!details) return;
    try {
      const data = await api.editProject(project.project_id, details.name, details.color);
      this.projects = this.projects.map((p) => (p.project_id === project.project_id ? data.project : p));
      this.render();
      this.onView(this.current, { refresh: false });
    } catch (err) {
      toastError(err);
    }
  }

  async remove(project) {
    const confirmed = await confirmAction({
      title: `Delete the project “${project.name}”?`,
      message: "Its sessions are kept: they move out of the project.",
      confirmLabel: "Delete project",
    });
    if (!confirmed) return;
    try {
      const data = await api.deleteProject(project.project_id);
      this.projects = this.projects.filter((p) => p.project_id !== project.project_id);
      const moved = (data.moved || []).length;
      toast(`Deleted project “${project.name}”; its ${moved} session${moved === 1 ? "" : "s"} kept.`);
      this.view(this.current === project.project_id ? null : this.current);
    } catch (err) {
      toastError(err);
    }
  }

  // The project to move sessions into: {projectId, name} (projectId null: out of any), or null if cancelled.
  async chooseTarget(title) {
    const body = el("label", "project-field", "Project");
    const select = el("select", "project-select");
    select.append(new Option("No project", ""));
    for (const project of this.projects) select.append(new Option(project.name, project.project_id));
    if (this.current) select.value = this.current;
    body.append(select);
    queueMicrotask(() => select.focus());
    const answer = await ask({ title, body, buttons: [{ label: "Move", value: "ok" }] });
    if (answer !== "ok") return null;
    const project = this.find(select.value);
    return { projectId: project ? project.project_id : null, name: project ? project.name : null };
  }
}

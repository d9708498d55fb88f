// Attachments in the composer: a button, drag-and-drop anywhere on the conversation, and paste. Each
// file is uploaded at once into the session's workspace (the server names it safely and checks its
// type and size) and shown as a chip; sending names the uploaded paths.

import { api } from "./api.js";
import { el } from "./dom.js";
import { acceptFileDrops, base64Of } from "./file_drops.js";
import { toastError } from "./toast.js";

function paperclip() {
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("viewBox", "0 0 24 24");
  svg.setAttribute("width", "20");
  svg.setAttribute("height", "20");
  svg.setAttribute("aria-hidden", "true");
  const path = document.createElementNS(ns, "path");
  path.setAttribute("d", "M21 11.5l-8.6 8.6a5 5 0 0 1-7.1-7.1l9.2-9.2a3.3 3.3 0 0 1 4.7 4.7l-9.2 9.2a1.7 1.7 0 0 1-2.4-2.4l8.5-8.5");
  path.setAttribute("fill", "none");
  path.setAttribute("stroke", "currentColor");
  path.setAttribute("stroke-width", "2");
  path.setAttribute("stroke-linecap", "round");
  svg.append(path);
  return svg;
}

export class AttachmentTray {
  // `ensureSession()` answers the session id the files go to (creating the session when needed).
  constructor({ form, input, dropZone, ensureSession }) {
    this.ensureSession = ensureSession;
    this.items = []; // {name, path, kind, chip, pending}
    this.tray = el("ul", "attach-tray");
    this.tray.setAttribute("aria-label", "Attachments");
    this.tray.hidden = true;
    const row = form.querySelector(".composer-row");
    row.before(this.tray);
    this.picker = el("input");
    this.picker.type = "file";
    this.picker.multiple = true;
    this.picker.hidden = true;
    this.picker.addEventListener("change", () => {
      this.addFiles([...this.picker.files]);
      this.picker.value = "";
    });
    const button = el("button", "icon-btn attach-btn");
    button.append(paperclip());
    button.type = "button";
    button.setAttribute("aria-label", "Attach files");
    button.title = "Attach files (or drop them here, or paste)";
    button.addEventListener("click", () => this.picker.click());
    row.prepend(button, this.picker);
    input.addEventListener("paste", (event) => {
      const files = [...(event.clipboardData?.files || [])];
      if (files.length) {
        event.preventDefault();
        this.addFiles(files);
      }
    });
    acceptFileDrops(dropZone, (files) => this.addFiles(files));
  }

  get busy() {
    return this.items.some((item) => item.pending);
  }

  paths() {
    return this.items.filter((item) => item.path).map((item) => item.path);
  }

  clear() {
    this.items = [];
    this.tray.replaceChildren();
    this.tray.hidden = true;
  }

  remove(item) {
    this.items = this.items.filter((other) => other !== item);
    item.chip.remove();
    this.tray.hidden = !this.items.length;
  }

  async addFiles(files) {
    let sid;
    try {
      sid = await this.ensureSession();
    } catch (err) {
      toastError(err);
      return;
    }
    await Promise.all(files.map((file) => this.upload(sid, file)));
  }

  async upload(sid, file) {
    const chip = el("li", "attach-chip pending");
    const label = el("span", "attach-name", file.name || "pasted file");
    const close = el("button", "icon-btn attach-remove", "×");
    close.type = "button";
    close.setAttribute("aria-label", `Remove ${file.name || "the attachment"}`);
    chip.append(label, close);
    const item = { name: file.name, chip, pending: true, path: null, kind: null };
    close.addEventListener("click", () => this.remove(item));
    this.items.push(item);
    this.tray.append(chip);
    this.tray.hidden = false;
    try {
      const data = await base64Of(file);
      const stored = (await api.attach(sid, file.name || "pasted.png", data)).attachment;
      Object.assign(item, { path: stored.path, kind: stored.kind, pending: false });
      label.textContent = stored.name;
      chip.title = stored.path;
      chip.classList.remove("pending");
      chip.classList.add(`attach-${stored.kind}`);
    } catch (err) {
      this.remove(item);
      toastError(err);
    }
  }
}

// Files in and out of the workspace as wholes: a folder's download as a zip (a link on its row), and
// uploads into a folder, by a button or by dropping files on a folder or the tree. An upload never
// replaces a file: when the name is taken, the person chooses to keep both (a new name) or skip it.

import { postJSON } from "./api.js";
import { ask } from "./dialog.js";
import { base64Of } from "./file_drops.js";
import { el } from "./dom.js";
import { toastError } from "./toast.js";

export function folderZipUrl(sid, path) {
  return `/api/folder/download?${new URLSearchParams({ session_id: sid, path })}`;
}

// "the workspace" for its root, else the folder's path: how a message names where files went.
export function folderLabel(path) {
  return path ? path : "the workspace";
}

export function folderDownloadLink(sid, entry) {
  const link = el("a", "files-zip", "⤓");
  link.href = folderZipUrl(sid, entry.path);
  link.setAttribute("download", `${entry.name}.zip`);
  link.setAttribute("aria-label", `Download ${entry.name} as a zip`);
  link.title = `Download ${entry.name} as a zip`;
  return link;
}

// A button that opens the file picker; `onFiles(files)` gets the chosen ones.
export function uploadButton(onFiles) {
  const picker = el("input", "files-upload-input");
  picker.type = "file";
  picker.multiple = true;
  picker.hidden = true;
  picker.addEventListener("change", () => {
    const files = [...picker.files];
    picker.value = "";
    if (files.length) onFiles(files);
  });
  const button = el("button", "btn btn-small files-upload", "Upload");
  button.type = "button";
  button.addEventListener("click", () => picker.click());
  return [button, picker];
}

async function uploadOne(sid, folder, file, data, keepBoth) {
  return postJSON("/api/file/upload", { session_id: sid, path: folder, name: file.name, data, keep_both: keepBoth });
}

// Upload `files` into `folder`, one after another; the paths they were stored at (a file the person
// chose to skip, or that failed, is left out, its error shown).
export async function uploadFiles(sid, folder, files) {
  const stored = [];
  for (const file of files) {
    try {
      const data = await base64Of(file);
      try {
        stored.push((await uploadOne(sid, folder, file, data, false)).path);
      } catch (err) {
        if (err.status !== 409) throw err;
        const choice = await ask({
          title: `${file.name} already exists`,
          message: `${folderLabel(folder)} already holds a file named ${file.name}. It is never replaced: keep both (the upload gets a new name) or skip it.`,
          buttons: [{ label: "Keep both", value: "both" }],
          cancelLabel: "Skip",
        });
        if (choice === "both") stored.push((await uploadOne(sid, folder, file, data, true)).path);
      }
    } catch (err) {
      toastError(err);
    }
  }
  return stored;
}

// The files panel's "Changes" for a session whose files are on another host: the work tree there against
// HEAD (the agent's checkpoints cover only this machine's folders), each changed path and its diff.

import { getJSON } from "./api.js";
import { diffView } from "./diff_view.js";
import { button, el } from "./dom.js";
import { toastError } from "./toast.js";

export async function showGitChanges(panel) {
  const sid = panel.sessionId;
  try {
    const data = await getJSON("/api/git/status", { session_id: sid });
    if (sid !== panel.sessionId) return;
    const list = el("div", "files-changes");
    list.append(el("h3", "files-trash-title", `Uncommitted on ${panel.remote} (branch ${data.branch})`));
    if (!data.entries.length) list.append(el("p", "files-note", "Nothing changed since the last commit."));
    for (const entry of data.entries) {
      const row = el("div", "files-change");
      row.append(el("span", "files-change-path", entry.path), el("span", "files-change-what", entry.state));
      const tools = el("div", "files-file-tools");
      tools.append(button("Diff", () => showGitDiff(panel, entry.path)));
      row.append(tools);
      list.append(row);
    }
    if (data.truncated) list.append(el("p", "files-note", "Only the first 5,000 changes are listed."));
    panel.selected = null;
    panel.preview.replaceChildren(list);
  } catch (err) {
    panel.preview.replaceChildren(el("p", "form-error", err.message));
  }
}

async function showGitDiff(panel, path) {
  try {
    const data = await getJSON("/api/git/diff", { session_id: panel.sessionId, path });
    const box = el("div", "files-diff");
    box.append(button("← Changes", () => showGitChanges(panel)), el("pre", "files-stat", path));
    box.append(diffView(data));
    panel.preview.replaceChildren(box);
  } catch (err) {
    toastError(err);
  }
}

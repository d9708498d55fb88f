// The part of the files panel's "Changes" for a session whose files are on another host that only a git work
// tree has: the work tree there against HEAD, each changed path and its diff.

import { getJSON } from "./api.js";
import { diffView } from "./diff_view.js";
import { button, el } from "./dom.js";
import { toastError } from "./toast.js";

export async function gitSection(panel) {
  const section = el("div", "files-git");
  try {
    const data = await getJSON("/api/git/status", { session_id: panel.sessionId });
    section.append(el("h3", "files-trash-title", `Uncommitted on ${panel.remote} (branch ${data.branch})`));
    if (!data.entries.length) section.append(el("p", "files-note", "Nothing changed since the last commit."));
    for (const entry of data.entries) {
      const row = el("div", "files-change");
      row.append(el("span", "files-change-path", entry.path), el("span", "files-change-what", entry.state));
      const tools = el("div", "files-file-tools");
      tools.append(button("Diff", () => showGitDiff(panel, entry.path)));
      row.append(tools);
      section.append(row);
    }
    if (data.truncated) section.append(el("p", "files-note", "Only the first 5,000 changes are listed."));
  } catch (err) {
    section.append(el("p", "files-note", err.status === 404 ? `Not a git repository on ${panel.remote}.` : err.message));
  }
  return section;
}

async function showGitDiff(panel, path) {
  try {
    const data = await getJSON("/api/git/diff", { session_id: panel.sessionId, path });
    const box = el("div", "files-diff");
    box.append(button("← Changes", () => panel.showChanges()), el("pre", "files-stat", path));
    box.append(diffView(data));
    panel.preview.replaceChildren(box);
  } catch (err) {
    toastError(err);
  }
}

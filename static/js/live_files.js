// The files the agent writes during a live turn, from the turn's tool events: a write_file or patch call
// (its path from the call's arguments) that completed without error names a file of the workspace.

const FILE_TOOLS = new Set(["write_file", "patch"]);

// A tool's path relative to the workspace: as given when relative, the part under the workspace when
// absolute inside it, else null (outside: not the panel's).
export function workspacePath(path, workspace) {
  if (typeof path !== "string" || !path.trim()) return null;
  let relative = path.trim();
  if (relative.startsWith("/")) {
    const root = String(workspace || "").replace(/\/+$/, "");
    if (!root || !relative.startsWith(`${root}/`)) return null;
    relative = relative.slice(root.length + 1);
  }
  const parts = [];
  for (const part of relative.split("/")) {
    if (!part || part === ".") continue;
    if (part === ".." || part.startsWith("~")) return null;
    parts.push(part);
  }
  return parts.length ? parts.join("/") : null;
}

export class LiveFiles {
  constructor(onWritten) {
    this.onWritten = onWritten;
    this.calls = new Map(); // tool call id → its path argument
  }

  // `tool` and `tool_complete` events of the live turn; `workspace` is the session's folder.
  event(name, data, workspace) {
    if (!data || !FILE_TOOLS.has(data.name)) return;
    if (name === "tool") {
      if (data.id) this.calls.set(data.id, data.args && data.args.path);
      return;
    }
    const path = this.calls.get(data.id);
    this.calls.delete(data.id);
    const relative = data.is_error ? null : workspacePath(path, workspace);
    if (relative) this.onWritten(relative);
  }
}

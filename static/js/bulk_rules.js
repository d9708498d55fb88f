// What the sidebar's bulk actions decide, apart from the DOM: the rows a shift-click reaches, the words
// of the toast, and the requests that undo an action from its per-id outcomes.

// The ids from `anchor` to `target` inclusive, in the order shown; just `target` when the anchor is gone.
export function rangeIds(orderedIds, anchor, target) {
  const from = orderedIds.indexOf(anchor);
  const to = orderedIds.indexOf(target);
  if (from < 0 || to < 0) return [target];
  const [start, end] = from <= to ? [from, to] : [to, from];
  return orderedIds.slice(start, end + 1);
}

const VERBS = { move: "Moved", archive: "Archived", unarchive: "Unarchived", delete: "Deleted", restore: "Restored" };

function sessions(count) {
  return `${count} session${count === 1 ? "" : "s"}`;
}

// "Deleted 12 sessions", "Moved 3 sessions to Research"; failures are counted after.
export function summary(action, result, projectName) {
  const done = Number(result?.done || 0);
  const failed = Number(result?.failed || 0);
  let text = `${VERBS[action] || "Changed"} ${sessions(done)}`;
  if (action === "move") text += projectName ? ` to ${projectName}` : " out of their project";
  if (failed) text += ` · ${failed} could not be changed`;
  return text;
}

// The bulk requests that put back what `action` changed: only the ids it did change, a move back to
// each session's own previous project.
export function undoRequests(action, results) {
  const done = (results || []).filter((r) => r && r.ok);
  if (!done.length) return [];
  if (action === "delete") return [{ action: "restore", undo_tokens: done.map((r) => r.undo_token) }];
  if (action === "archive" || action === "unarchive") {
    return [{ action: action === "archive" ? "unarchive" : "archive", session_ids: done.map((r) => r.session_id) }];
  }
  if (action !== "move") return [];
  const byProject = new Map();
  for (const r of done) {
    const back = r.previous_project_id || null;
    if (!byProject.has(back)) byProject.set(back, []);
    byProject.get(back).push(r.session_id);
  }
  return [...byProject].map(([projectId, ids]) => ({ action: "move", session_ids: ids, project_id: projectId }));
}

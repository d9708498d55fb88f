// Branch lineage under the chat title: "Branch of <parent>" in a branch, "Branches: …" in its parent.

import { el } from "./dom.js";

function lineageBox() {
  let box = document.getElementById("lineage");
  if (!box) {
    box = el("nav", "lineage");
    box.id = "lineage";
    box.setAttribute("aria-label", "Branches");
    document.querySelector(".chat-head")?.after(box);
  }
  return box;
}

function link(row) {
  const a = el("a", "lineage-link", row.title || "Untitled");
  a.href = `#/s/${row.session_id}`;
  return a;
}

// `sessions.find(sid)` and `sessions.rows` come from the sidebar's list.
export function showLineage(session, sessions) {
  const box = lineageBox();
  box.replaceChildren();
  const sid = session && (session.session_id || session.id);
  if (!sid || session.read_only) {
    box.hidden = true;
    return;
  }
  const parentId = session.parent_session_id;
  const parent = parentId ? sessions.find(parentId) : null;
  if (parentId) {
    box.append(el("span", "lineage-label", "Branch of "));
    box.append(parent ? link(parent) : el("span", "lineage-missing", "a deleted session"));
  }
  const children = (sessions.rows || []).filter((row) => row.parent_session_id === sid);
  if (children.length) {
    if (parentId) box.append(el("span", "lineage-sep", " · "));
    box.append(el("span", "lineage-label", children.length === 1 ? "Branch: " : "Branches: "));
    children.forEach((row, i) => {
      if (i) box.append(", ");
      box.append(link(row));
    });
  }
  box.hidden = !box.childElementCount;
}

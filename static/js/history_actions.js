// What a message's actions do to the history around it: switch an edited message's version, branch
// before a message, and the choice an edit of an earlier message offers (a new version here, or a branch).

import { api } from "./api.js";
import { ask } from "./dialog.js";
import { toast, toastError } from "./toast.js";
import { steppedVersion } from "./versions.js";

// Shows the previous or next version of an edited or regenerated message (its answer and what followed).
export async function switchVersion(app, msg, step) {
  const sid = app.chat.sessionId;
  const version = steppedVersion(app.chat.session?.message_versions, msg._idx, step);
  if (version === null || app.chat.streaming) return;
  try {
    const data = await api.switchVersion(sid, msg._idx, version);
    if (app.chat.sessionId !== sid) return;
    app.chat.keepReadingPosition(() => app.chat.applySession(data.session, { replace: true }));
    app.sessions.upsert(data.session);
  } catch (err) {
    toastError(err);
  }
}

// A new session holding the messages before `keepCount`; opens it and returns its id.
export async function branchAt(app, keepCount) {
  try {
    const data = await api.branch(app.chat.sessionId, keepCount);
    app.sessions.upsert(data.session);
    await app.open(data.session.session_id);
    toast("Branched into a new session.");
    return data.session.session_id;
  } catch (err) {
    toastError(err);
    return null;
  }
}

// Edited message at `editIdx`: the last one replaces its turn; an earlier one asks first. The session the
// message goes to, or null when the person cancelled.
export async function applyEdit(app, sid, editIdx) {
  const later = editIdx !== app.chat.lastUserIdx();
  const choice = later
    ? await ask({
        title: "Edit an earlier message",
        message:
          "The edit can continue here as a new version of the message (‹ › on it switches back to the earlier one), or in a new branch.",
        buttons: [
          { label: "Branch", value: "branch", kind: "primary" },
          { label: "New version", value: "replace" },
        ],
      })
    : "replace";
  if (choice === "branch") return branchAt(app, editIdx);
  if (choice !== "replace") return null;
  const cut = await api.truncate(sid, editIdx);
  app.chat.applySession(cut.session, { replace: true });
  return sid;
}

// The open session's unsent draft, kept on the server (`/api/session/draft`), so the session opened in any
// tab or on any device finds what was typed. Saved a moment after the typing stops and when the tab is
// hidden; the box shows the draft of each session opened; sending clears it (the server does, with the
// message). A read-only conversation and an edit of an earlier message keep no draft.

import { api } from "./api.js";

export const SAVE_DELAY_MS = 600;

export class DraftKeeper {
  constructor(input, { isEditing = () => false } = {}) {
    this.input = input;
    this.isEditing = isEditing;
    this.sessionId = null; // the session the box belongs to, null when it keeps no draft
    this.saved = ""; // what the server holds for it
    this.timer = null;
    this.saving = Promise.resolve();
    input.addEventListener("input", () => this.schedule());
    document.addEventListener("visibilitychange", () => {
      if (document.visibilityState === "hidden") this.flush();
    });
  }

  // A session is shown: when it is another one, the box takes its draft (the previous one's is saved first).
  open(session) {
    const sid = session && !session.read_only && session.session_id ? session.session_id : null;
    if (sid === this.sessionId) return;
    const previous = this.sessionId;
    if (previous) this.flush();
    this.sessionId = sid;
    const draft = session?.composer_draft;
    this.saved = sid && draft && typeof draft.text === "string" ? draft.text : "";
    // Text typed with no session open is the first message of the one it creates, and the box keeps what
    // was typed when its session goes away (deleted elsewhere): only another session's draft replaces it.
    if (sid && (previous || (this.saved && !this.input.value))) this.input.value = this.saved;
  }

  schedule() {
    if (!this.sessionId) return;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.flush(), SAVE_DELAY_MS);
  }

  // Saves what the box holds now, if the server holds something else.
  flush() {
    clearTimeout(this.timer);
    this.timer = null;
    const sid = this.sessionId;
    const text = this.input.value;
    if (!sid || text === this.saved || this.isEditing()) return this.saving;
    this.saved = text;
    this.saving = api.saveDraft(sid, text).catch(() => {
      if (this.sessionId === sid && this.saved === text) this.saved = null; // unknown: the next change saves again
    });
    return this.saving;
  }

  // The session is gone (deleted here or elsewhere): nothing is saved to it any more; the box keeps its text.
  forget(sid) {
    if (sid !== this.sessionId) return;
    clearTimeout(this.timer);
    this.timer = null;
    this.sessionId = null;
    this.saved = "";
  }

  // The message is being sent: the server clears the draft with it, so nothing pending may save it again.
  sent() {
    clearTimeout(this.timer);
    this.timer = null;
    this.saved = "";
  }
}

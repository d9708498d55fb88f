// /clear with an undo window: the transcript empties at once and the clear is committed when the window
// closes, or before anything that depends on it (a message, another command) is done.

import { api } from "./api.js";
import { confirmAction } from "./dialog.js";
import { PendingAction } from "./pending.js";
import { toast, toastError } from "./toast.js";

export const CLEAR_UNDO_MS = 5000;

export class UndoableClear {
  // `chat` is the chat view; `onGone(sid)` is called when the session was deleted elsewhere meanwhile.
  constructor(chat, { onGone }) {
    this.chat = chat;
    this.onGone = onGone;
    this.pending = null;
  }

  async start(sid) {
    const confirmed = await confirmAction({
      title: "Clear this conversation?",
      message: "Every message of this session is removed. You can undo this for a few seconds.",
      confirmLabel: "Clear",
    });
    if (!confirmed) return false;
    this.chat.hideAll();
    const pending = new PendingAction({
      delayMs: CLEAR_UNDO_MS,
      commit: async () => {
        try {
          await api.clear(sid);
        } catch (err) {
          // Deleted in another tab before the feed said so: nothing is left to clear.
          if (err.status === 404) return this.onGone(sid);
          toastError(err);
        }
        if (this.chat.sessionId === sid) await this.chat.reload().catch(toastError);
      },
      undo: () => {
        if (this.chat.sessionId === sid) this.chat.renderAll();
      },
    });
    pending.sessionId = sid;
    this.pending = pending;
    pending.dismissNotice = toast("Conversation cleared.", {
      action: "Undo",
      timeout: CLEAR_UNDO_MS,
      onAction: () => pending.undo(),
    });
    return true;
  }

  // A clear still in its undo window for a session deleted elsewhere is dropped with its Undo notice.
  dropFor(sid) {
    const pending = this.pending;
    if (!pending || pending.sessionId !== sid) return;
    this.pending = null;
    pending.drop();
    pending.dismissNotice?.();
  }

  async flush() {
    const pending = this.pending;
    this.pending = null;
    if (pending) await pending.flush();
  }
}

// After the first exchange the server asks the model for a title in the background; the page looks
// for it a few times and shows it in the header and the sidebar (renaming still wins).

import { api } from "./api.js";

const TRIES = 12;
const EVERY_MS = 1500;
const watched = new Set();

export function isFirstExchange(session) {
  return Boolean(session && !session.read_only && !session.manual_title && session.user_message_count === 1 && session.message_count >= 2);
}

// Calls `onTitle(row)` once the title differs from `session.title`; gives up after a while.
export function watchTitle(session, onTitle) {
  const sid = session.session_id;
  if (!sid || watched.has(sid)) return;
  watched.add(sid);
  const before = session.title;
  let tries = 0;
  const look = async () => {
    tries += 1;
    try {
      const row = (await api.session(sid, { limit: 1 })).session;
      if (row.title !== before || row.manual_title) {
        if (!row.manual_title) onTitle(row);
        return;
      }
    } catch {
      return; // deleted or unreachable: the title no longer matters
    }
    if (tries < TRIES) setTimeout(look, EVERY_MS);
  };
  setTimeout(look, EVERY_MS / 3);
}

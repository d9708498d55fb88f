// Which copy of a sidebar row is the newest, whatever order the answers reach the page in.
//
// The server numbers every change of a session (the ids of the sidebar feed, /api/sessions/feed) and
// streams a change only once it is saved, so a request that starts after the tab received change N is
// answered with data that includes N. A copy is therefore "current to" the feed position the tab had
// reached when its request started (a list page says so itself: its `feed_seq`). Each row keeps the
// position it is current to (`_seq`); a copy current to an earlier position never replaces it, and a
// session the feed removed is not brought back by an older copy. Nothing is lost by refusing a copy:
// the feed delivers every change, including the one a refused answer carried.

// The field a session payload carries once received: the feed position when its request started.
export const READ_AT = "_readAt";

let received = 0; // the newest feed change this tab has received

export function feedPosition() {
  return received;
}

export function noteFeedPosition(seq) {
  if (Number.isFinite(seq)) received = seq;
}

// Marks the session payload of an answer (`data.session`) with the position its request started at.
export function stampRead(data, startedAt) {
  const session = data && data.session;
  if (session && typeof session === "object" && !Array.isArray(session)) session[READ_AT] = startedAt;
  return data;
}

// The position a copy is current to; null when unknown (a payload that did not come from a request).
export function readPosition(copy) {
  const seq = copy ? copy[READ_AT] : undefined;
  return Number.isFinite(seq) ? seq : null;
}

// The row to keep when `incoming`, current to `seq` (null: unknown), meets `known` (undefined when the
// tab has no row); `removedAt` is the feed change that removed the session, if the tab received one.
// Returns null when the session stays out of the list.
export function chooseRow(known, incoming, seq, removedAt) {
  const { [READ_AT]: _readAt, ...fields } = incoming;
  if (known) {
    if (seq === null || seq < known._seq) return known;
    return { ...known, ...fields, _seq: seq };
  }
  if (Number.isFinite(removedAt) && (seq === null || seq < removedAt)) return null;
  return { ...fields, _seq: seq ?? Number.NEGATIVE_INFINITY };
}

// Whether the tab's row is newer than `copy` (a session payload), so the row's fields win over it.
export function isNewerThan(row, copy) {
  return Boolean(row) && row._seq > (readPosition(copy) ?? Number.NEGATIVE_INFINITY);
}

// The header fields of the open session that its sidebar row carries, so the feed keeps them current.
export const HEADER_FIELDS = ["title", "model", "model_provider", "workspace", "pinned", "archived"];

// The open session as the header shows it: `session` (a payload) with the header fields of the tab's row
// when the row is newer; the same object when nothing differs, so a caller can tell nothing changed.
export function followRow(session, row) {
  if (!session || !isNewerThan(row, session)) return session;
  const changed = HEADER_FIELDS.filter((name) => name in row && row[name] !== session[name]);
  if (!changed.length) return session;
  return { ...session, ...Object.fromEntries(changed.map((name) => [name, row[name]])) };
}

// The list after a page current to `seq` arrives while the feed runs: the page's rows, except where the
// tab already holds a newer copy, plus rows the feed brought after the page was read; rows the page
// lacks and that are no newer than it are gone.
export function mergePage(rows, pageRows, seq, removedAt) {
  const known = new Map(rows.map((row) => [row.session_id, row]));
  const merged = [];
  const placed = new Set();
  for (const row of pageRows) {
    if (!row || !row.session_id || placed.has(row.session_id)) continue;
    const kept = chooseRow(known.get(row.session_id), row, seq, removedAt.get(row.session_id));
    placed.add(row.session_id);
    if (kept) merged.push(kept);
  }
  for (const row of rows) {
    if (!placed.has(row.session_id) && row._seq > seq) merged.push(row);
  }
  return merged;
}

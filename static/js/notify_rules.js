// Which turn events earn a browser notification, what it says, and the memory that keeps it to one per
// event: every tab of the browser names an event by the same tag (the session, the turn's stream, the
// question's id), so a tag shown once, here or in another tab, is never shown again.

const LABELS = {
  done: (title) => ({ title: "Hermes answered", body: title }),
  approval: (title) => ({ title: "Hermes asks for approval", body: title }),
  clarify: (title) => ({ title: "Hermes has a question", body: title }),
};

// The notice for a turn event `name` with its `data`, or null when it is not one a person waits for.
export function noticeFor(name, data, { sessionId, streamId, title }) {
  if (!sessionId || !LABELS[name]) return null;
  let id;
  if (name === "done") id = streamId;
  else if (name === "approval") id = data?.approval_id;
  else id = data?.clarify_id;
  if (!id) return null;
  const words = LABELS[name](title || "A session");
  return { kind: name, tag: `talaria:${name}:${sessionId}:${id}`, sessionId, ...words };
}

// Only a tab out of sight notifies, and only once the person allowed it and switched it on.
export function mayNotify({ permission, enabled, visibility }) {
  return permission === "granted" && Boolean(enabled) && visibility === "hidden";
}

// The tags already shown (by this tab or told by another), oldest forgotten past `limit`.
export class SeenTags {
  constructor(limit = 500) {
    this.limit = limit;
    this.tags = new Set();
  }

  has(tag) {
    return this.tags.has(tag);
  }

  // Records `tag`; false when it was there already.
  add(tag) {
    if (this.tags.has(tag)) return false;
    this.tags.add(tag);
    if (this.tags.size > this.limit) this.tags.delete(this.tags.values().next().value);
    return true;
  }
}

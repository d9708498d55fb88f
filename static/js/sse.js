// A chat turn's events over EventSource. After a dropped connection the browser reconnects by itself
// and sends Last-Event-ID, so the server resumes after the last event seen; sequence numbers are also
// checked here, so nothing is shown twice. The stream is closed only after the server has ended it
// (past `done`): closing earlier would abort a request that is still loading.

export const EVENT_NAMES = [
  "token",
  "render",
  "reasoning",
  "tool",
  "tool_complete",
  "work",
  "status",
  "compressing",
  "compressed",
  "title",
  "error",
  "cancelled",
  "approval",
  "approval_resolved",
  "clarify",
  "clarify_resolved",
  "queue",
  "steer",
  "done",
];

// How long to wait for the server to close a finished stream before closing it from this side.
const CLOSE_GRACE_MS = 5000;

export function parseData(text) {
  if (!text) return {};
  try {
    const value = JSON.parse(text);
    return value && typeof value === "object" ? value : { value };
  } catch {
    return { text };
  }
}

// Follows one chat stream until `done`. `onEvent(name, data, seq)` sees each event once, in order.
// `onGone()` runs when the server no longer knows the stream (e.g. after a restart).
export function followStream(streamId, { onEvent, onGone, onReconnecting, onOpen, afterSeq = 0 } = {}) {
  let lastSeq = afterSeq;
  let finished = false;
  let muted = false;
  let settle;
  const done = new Promise((resolve) => {
    settle = resolve;
  });
  const after = afterSeq > 0 ? `&after=${afterSeq}` : "";
  const source = new EventSource(`/api/chat/stream?stream_id=${encodeURIComponent(streamId)}${after}`);
  let graceTimer = null;

  const end = (result) => {
    clearTimeout(graceTimer);
    source.close();
    settle(result);
  };

  const deliver = (name, event) => {
    const seq = Number(event.lastEventId);
    if (Number.isFinite(seq) && seq > 0) {
      if (seq <= lastSeq) return; // already seen before a reconnect
      lastSeq = seq;
    }
    if (finished) return;
    if (!muted) onEvent?.(name, parseData(event.data), seq);
    if (name === "done") {
      finished = true;
      graceTimer = setTimeout(() => end(true), CLOSE_GRACE_MS);
    }
  };
  for (const name of EVENT_NAMES) source.addEventListener(name, (event) => deliver(name, event));

  source.addEventListener("open", () => onOpen?.());
  source.addEventListener("error", () => {
    if (finished) return end(true); // the server closed the stream after `done`: all is in
    if (source.readyState === EventSource.CLOSED) {
      end(false);
      if (!muted) onGone?.();
      return;
    }
    if (!muted) onReconnecting?.(lastSeq); // the browser retries with Last-Event-ID
  });

  return {
    done,
    get lastSeq() {
      return lastSeq;
    },
    // Stops delivering events. The connection stays until the server ends the turn, so no request is
    // aborted half way; the turn itself goes on on the server.
    close() {
      muted = true;
    },
  };
}

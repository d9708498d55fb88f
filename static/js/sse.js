// Server-Sent Events over fetch: frames are parsed by hand so a dropped connection can resume with
// Last-Event-ID (nothing lost, nothing repeated) and the stream ends exactly when `done` arrives.

const RETRY_DELAYS_MS = [250, 500, 1000, 2000, 4000];
const MAX_ATTEMPTS_WITHOUT_PROGRESS = 12;

// Splits a text buffer into complete SSE frames; returns [frames, rest].
export function splitFrames(buffer) {
  const normalized = buffer.replace(/\r\n?/g, "\n");
  const parts = normalized.split("\n\n");
  const rest = parts.pop();
  const frames = [];
  for (const block of parts) {
    const frame = parseFrame(block);
    if (frame) frames.push(frame);
  }
  return [frames, rest];
}

export function parseFrame(block) {
  let id = null;
  let event = "message";
  const data = [];
  for (const line of block.split("\n")) {
    if (!line || line.startsWith(":")) continue;
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "id") id = value;
    else if (field === "event") event = value;
    else if (field === "data") data.push(value);
  }
  if (!data.length && id === null) return null;
  const text = data.join("\n");
  let payload = {};
  if (text) {
    try {
      payload = JSON.parse(text);
    } catch {
      payload = { text };
    }
  }
  return { id, event, data: payload };
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// Follows one chat stream until `done`. `onEvent(name, data, seq)` sees each event once, in order.
// `onGone()` runs when the server no longer knows the stream (e.g. after a restart).
export function followStream(streamId, { onEvent, onGone, onReconnecting, afterSeq = 0 } = {}) {
  let lastSeq = afterSeq;
  let closed = false;
  let finished = false;

  async function readOnce() {
    const headers = { Accept: "text/event-stream" };
    if (lastSeq > 0) headers["Last-Event-ID"] = String(lastSeq);
    const url = `/api/chat/stream?stream_id=${encodeURIComponent(streamId)}`;
    const response = await fetch(url, { headers, credentials: "same-origin", cache: "no-store" });
    if (response.status === 404 || response.status === 410) return "gone";
    if (!response.ok || !response.body) throw new Error(`stream answered ${response.status}`);
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    let progressed = false;
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      const [frames, rest] = splitFrames(buffer);
      buffer = rest;
      for (const frame of frames) {
        const seq = frame.id !== null ? Number(frame.id) : null;
        if (seq !== null && Number.isFinite(seq)) {
          if (seq <= lastSeq) continue; // already seen before a reconnect
          lastSeq = seq;
        }
        progressed = true;
        if (!closed && !finished) onEvent?.(frame.event, frame.data, seq);
        if (frame.event === "done") finished = true;
      }
    }
    return progressed ? "progress" : "empty";
  }

  const done = (async () => {
    let failures = 0;
    while (!closed && !finished) {
      let outcome;
      try {
        outcome = await readOnce();
      } catch {
        outcome = "error";
      }
      if (finished || closed) break;
      if (outcome === "gone") {
        onGone?.();
        break;
      }
      failures = outcome === "progress" ? 0 : failures + 1;
      if (failures > MAX_ATTEMPTS_WITHOUT_PROGRESS) {
        onGone?.();
        break;
      }
      onReconnecting?.(lastSeq);
      await sleep(RETRY_DELAYS_MS[Math.min(failures, RETRY_DELAYS_MS.length - 1)]);
    }
    return finished;
  })();

  return {
    done,
    get lastSeq() {
      return lastSeq;
    },
    // Stops delivering events; the open response is left to finish on its own (no aborted request).
    close() {
      closed = true;
    },
  };
}

// The HTTP client: JSON in and out, the CSRF header on every POST, one error type for every failure.
// A session in an answer is marked with the sidebar feed's position when its request started (freshness.js).

import { feedPosition, stampRead } from "./freshness.js";

let csrfToken = null;

export function setCsrfToken(token) {
  csrfToken = token || null;
}

export class ApiError extends Error {
  constructor(message, status, data) {
    super(message);
    this.name = "ApiError";
    this.status = status;
    this.data = data || {};
  }
}

function query(params) {
  const search = new URLSearchParams();
  for (const [key, value] of Object.entries(params || {})) {
    if (value !== undefined && value !== null && value !== "") search.set(key, String(value));
  }
  const text = search.toString();
  return text ? `?${text}` : "";
}

async function parse(response) {
  let data = null;
  const type = response.headers.get("Content-Type") || "";
  if (type.includes("application/json")) {
    try {
      data = await response.json();
    } catch {
      data = null;
    }
  }
  if (!response.ok) {
    const message = (data && data.error) || `${response.status} ${response.statusText}`;
    if (response.status === 401) window.dispatchEvent(new CustomEvent("talaria:auth-required"));
    throw new ApiError(message, response.status, data);
  }
  return data || {};
}

export async function getJSON(path, params) {
  const startedAt = feedPosition();
  let response;
  try {
    response = await fetch(path + query(params), { headers: { Accept: "application/json" }, credentials: "same-origin" });
  } catch (err) {
    throw new ApiError("The server cannot be reached.", 0, { cause: String(err) });
  }
  return stampRead(await parse(response), startedAt);
}

export async function postJSON(path, body) {
  const headers = { "Content-Type": "application/json", Accept: "application/json" };
  if (csrfToken) headers["X-CSRF-Token"] = csrfToken;
  const startedAt = feedPosition();
  let response;
  try {
    response = await fetch(path, { method: "POST", headers, body: JSON.stringify(body || {}), credentials: "same-origin" });
  } catch (err) {
    throw new ApiError("The server cannot be reached.", 0, { cause: String(err) });
  }
  return stampRead(await parse(response), startedAt);
}

export function csrfHeaders() {
  return csrfToken ? { "X-CSRF-Token": csrfToken } : {};
}

// One function per route of docs/http-api.md.
export const api = {
  authStatus: () => getJSON("/api/auth/status"),
  login: (password) => postJSON("/api/auth/login", { password }),
  logout: () => postJSON("/api/auth/logout", {}),
  recoveryStartup: () => getJSON("/api/recovery/startup"),
  recoveryAudit: () => getJSON("/api/session/recovery/audit"),

  sessions: ({ limit, cursor, projectId } = {}) => getJSON("/api/sessions", { limit, cursor, project_id: projectId }),
  search: (q) => getJSON("/api/sessions/search", { q, content: 1 }),
  session: (sessionId, { limit, before } = {}) =>
    getJSON("/api/session", { session_id: sessionId, msg_limit: limit, msg_before: before }),
  newSession: (fields) => postJSON("/api/session/new", fields || {}),
  rename: (sessionId, title) => postJSON("/api/session/rename", { session_id: sessionId, title }),
  pin: (sessionId, pinned) => postJSON("/api/session/pin", { session_id: sessionId, pinned }),
  archive: (sessionId, archived) => postJSON("/api/session/archive", { session_id: sessionId, archived }),
  remove: (sessionId) => postJSON("/api/session/delete", { session_id: sessionId }),
  restoreDeleted: (undoToken) => postJSON("/api/session/restore-deleted", { undo_token: undoToken }),
  projects: () => getJSON("/api/projects"),
  createProject: (name, color) => postJSON("/api/projects/create", { name, color }),
  editProject: (projectId, name, color) => postJSON("/api/projects/rename", { project_id: projectId, name, color }),
  deleteProject: (projectId) => postJSON("/api/projects/delete", { project_id: projectId }),
  move: (sessionId, projectId) => postJSON("/api/session/move", { session_id: sessionId, project_id: projectId }),
  bulk: (body) => postJSON("/api/sessions/bulk", body),
  retry: (sessionId) => postJSON("/api/session/retry", { session_id: sessionId }),
  undo: (sessionId) => postJSON("/api/session/undo", { session_id: sessionId }),
  truncate: (sessionId, keepCount) => postJSON("/api/session/truncate", { session_id: sessionId, keep_count: keepCount }),
  clear: (sessionId) => postJSON("/api/session/clear", { session_id: sessionId }),
  importAgentSession: (sessionId) => postJSON("/api/session/import_cli", { session_id: sessionId }),
  switchVersion: (sessionId, messageIndex, version) =>
    postJSON("/api/session/version", { session_id: sessionId, message_index: messageIndex, version }),
  branch: (sessionId, keepCount) => postJSON("/api/session/branch", { session_id: sessionId, keep_count: keepCount }),
  compress: (sessionId, focusTopic) =>
    postJSON("/api/session/compress", focusTopic ? { session_id: sessionId, focus_topic: focusTopic } : { session_id: sessionId }),
  uncompress: (sessionId) => postJSON("/api/session/uncompress", { session_id: sessionId }),

  saveDraft: (sessionId, text) => postJSON("/api/session/draft", { session_id: sessionId, text }),
  chatStart: (sessionId, message, attachments) =>
    postJSON("/api/chat/start", attachments?.length ? { session_id: sessionId, message, attachments } : { session_id: sessionId, message }),
  attach: (sessionId, name, data) => postJSON("/api/session/attach", { session_id: sessionId, name, data }),
  queueSend: (sessionId, message, mode, attachments) =>
    postJSON("/api/session/queue", { session_id: sessionId, message, mode, ...(attachments?.length ? { attachments } : {}) }),
  queueEdit: (sessionId, queueId, message) => postJSON("/api/session/queue/edit", { session_id: sessionId, queue_id: queueId, message }),
  queueCancel: (sessionId, queueId) => postJSON("/api/session/queue/cancel", { session_id: sessionId, queue_id: queueId }),
  chatCancel: (streamId, sessionId) =>
    postJSON("/api/chat/cancel", streamId ? { stream_id: streamId } : { session_id: sessionId }),

  models: (refresh) => getJSON("/api/models", { refresh: refresh ? 1 : undefined }),
  setModel: (sessionId, model, provider) =>
    postJSON("/api/session/model", { session_id: sessionId, model, model_provider: provider }),
  toolsets: (sessionId) => getJSON("/api/toolsets", { session_id: sessionId }),
  setToolsets: (sessionId, names) => postJSON("/api/session/toolsets", { session_id: sessionId, enabled_toolsets: names }),
  onboardingStatus: () => getJSON("/api/onboarding/status"),
  onboardingProbe: (fields) => postJSON("/api/onboarding/probe", fields),
  onboardingSetup: (fields) => postJSON("/api/onboarding/setup", fields),

  exportUrl: (sessionId, format) => `/api/session/export${query({ session_id: sessionId, format })}`,
};

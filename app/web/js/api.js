// The public HTTP API, as a frontend uses it: cookies for the session, the CSRF cookie echoed in
// `X-CSRF-Token` on every state-changing request, `{detail}` errors turned into readable text.
// Everything the page does goes through here, so it doubles as a short guide to the API.

const CSRF_COOKIE = "hearth_csrf";
const UNSAFE = new Set(["POST", "PUT", "PATCH", "DELETE"]);

export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

let onSignedOut = () => {};

/** Called with the error when the server answers 401: the session expired or was revoked. */
export function whenSignedOut(callback) {
  onSignedOut = callback;
}

function csrfToken() {
  for (const part of document.cookie.split(";")) {
    const [name, ...value] = part.trim().split("=");
    if (name === CSRF_COOKIE) return decodeURIComponent(value.join("="));
  }
  return "";
}

function headersFor(method, json) {
  const headers = { Accept: "application/json" };
  if (json) headers["Content-Type"] = "application/json";
  if (UNSAFE.has(method)) headers["X-CSRF-Token"] = csrfToken();
  return headers;
}

const sentence = (text) => text.charAt(0).toUpperCase() + text.slice(1);

/** The server's `{detail}` as one sentence (FastAPI's 422 list included). */
export function describe(status, body) {
  const detail = body && body.detail;
  if (typeof detail === "string" && detail) return sentence(detail);
  if (Array.isArray(detail) && detail.length) {
    return detail
      .map((item) => {
        const field = (item.loc || []).filter((part) => part !== "body").join(".");
        return field ? `${field}: ${item.msg}` : item.msg;
      })
      .join("; ");
  }
  if (status === 429) return "Too many attempts; wait a little and try again.";
  if (status >= 500) return "The server failed to answer; try again.";
  return `The request failed (HTTP ${status}).`;
}

async function failure(response, { quiet401 = false } = {}) {
  let body = null;
  try {
    body = await response.json();
  } catch {
    body = null;
  }
  const error = new ApiError(response.status, describe(response.status, body));
  if (response.status === 401 && !quiet401) onSignedOut(error);
  return error;
}

/** A JSON request; resolves to the parsed body (null for 202/204), rejects with ApiError. */
export async function request(method, path, body, options = {}) {
  let response;
  try {
    response = await fetch(path, {
      method,
      credentials: "same-origin",
      headers: headersFor(method, body !== undefined),
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch {
    throw new ApiError(0, "The server cannot be reached; check the connection and try again.");
  }
  if (!response.ok) throw await failure(response, options);
  if (response.status === 204 || response.status === 202) return null;
  const text = await response.text();
  return text ? JSON.parse(text) : null;
}

/** A request that answers a UI message stream (send, approvals); resolves to the Response. */
export async function streamRequest(path, body) {
  let response;
  try {
    response = await fetch(path, {
      method: "POST",
      credentials: "same-origin",
      headers: { ...headersFor("POST", true), Accept: "text/event-stream" },
      body: JSON.stringify(body),
    });
  } catch {
    throw new ApiError(0, "The server cannot be reached; check the connection and try again.");
  }
  if (!response.ok) throw await failure(response);
  return response;
}

/**
 * Follow the chat's running turn (`GET /api/chats/{id}/stream`): every event after `lastEventId`
 * (all of them from 0). Resolves to the Response, or null when no turn runs (204).
 */
export async function followStream(chatId, lastEventId = 0) {
  let response;
  try {
    response = await fetch(`/api/chats/${encodeURIComponent(chatId)}/stream`, {
      credentials: "same-origin",
      headers: {
        Accept: "text/event-stream",
        ...(lastEventId ? { "Last-Event-ID": String(lastEventId) } : {}),
      },
    });
  } catch {
    throw new ApiError(0, "The server cannot be reached; check the connection and try again.");
  }
  if (!response.ok) throw await failure(response);
  return response.status === 204 ? null : response;
}

/**
 * Upload files as one multipart request, reporting progress (fetch cannot report upload
 * progress, XMLHttpRequest can). Resolves to the created uploads.
 */
export function upload(files, chatId, onProgress) {
  return new Promise((resolve, reject) => {
    const form = new FormData();
    for (const file of files) form.append("file", file, file.name);
    if (chatId) form.append("chat_id", chatId);
    const xhr = new XMLHttpRequest();
    xhr.open("POST", "/api/uploads");
    xhr.withCredentials = true;
    xhr.setRequestHeader("X-CSRF-Token", csrfToken());
    xhr.setRequestHeader("Accept", "application/json");
    xhr.upload.onprogress = (event) => {
      if (event.lengthComputable) onProgress(event.loaded / event.total);
    };
    xhr.onerror = () => reject(new ApiError(0, "The upload failed: the server cannot be reached."));
    xhr.onload = () => {
      let body = null;
      try {
        body = JSON.parse(xhr.responseText);
      } catch {
        body = null;
      }
      if (xhr.status === 201) return resolve(body);
      const error = new ApiError(xhr.status, describe(xhr.status, body));
      if (xhr.status === 401) onSignedOut(error);
      reject(error);
    };
    xhr.send(form);
  });
}

export const api = {
  me: () => request("GET", "/api/auth/me", undefined, { quiet401: true }),
  login: (email, password) =>
    request("POST", "/api/auth/login", { email, password }, { quiet401: true }),
  register: (email, password, displayName) =>
    request("POST", "/api/auth/register", {
      email,
      password,
      ...(displayName ? { display_name: displayName } : {}),
    }),
  logout: () => request("POST", "/api/auth/logout", undefined, { quiet401: true }),
  models: () => request("GET", "/api/models"),
  chats: (cursor) =>
    request("GET", `/api/chats?limit=50${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`),
  chat: (id) => request("GET", `/api/chats/${encodeURIComponent(id)}`),
  createChat: (model) => request("POST", "/api/chats", model ? { model } : {}),
  updateChat: (id, changes) => request("PATCH", `/api/chats/${encodeURIComponent(id)}`, changes),
  deleteChat: (id) => request("DELETE", `/api/chats/${encodeURIComponent(id)}`),
  activations: (id) => request("GET", `/api/chats/${encodeURIComponent(id)}/activations`),
  compact: (id) => request("POST", `/api/chats/${encodeURIComponent(id)}/compact`),
  resetTools: (id) => request("DELETE", `/api/chats/${encodeURIComponent(id)}/activations`),
  tools: () => request("GET", "/api/tools"),
  uploads: (cursor) =>
    request("GET", `/api/uploads?limit=50${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`),
  deleteUpload: (id) => request("DELETE", `/api/uploads/${encodeURIComponent(id)}`),
  reindex: (id) => request("POST", `/api/uploads/${encodeURIComponent(id)}/ingest`),
  stop: (id) => request("POST", `/api/chats/${encodeURIComponent(id)}/stop`),
  /** `branch: {parent_id}` hangs the message under that message (an edit), else it continues. */
  send: (id, content, attachments, branch = {}) =>
    streamRequest(`/api/chats/${encodeURIComponent(id)}/messages`, {
      content,
      attachments,
      ...branch,
    }),
  /** The running turn from after event `lastEventId`, or null when none runs. */
  follow: (id, lastEventId) => followStream(id, lastEventId),
  /** A new answer to the user message `messageId`, streamed like a send. */
  regenerate: (id, messageId) =>
    streamRequest(`/api/chats/${encodeURIComponent(id)}/regenerate`, { message_id: messageId }),
  /** Show the branch through `messageId`; answers the chat as `chat(id)` does. */
  switchBranch: (id, messageId) =>
    request("PUT", `/api/chats/${encodeURIComponent(id)}/active`, { message_id: messageId }),
  /** Answers 202 while other calls still wait, or the turn's continuation as a stream. */
  decide: (id, decisions) =>
    streamRequest(`/api/chats/${encodeURIComponent(id)}/approvals`, { decisions }),
  disconnect: (group) =>
    request("DELETE", `/api/mcp/${encodeURIComponent(group)}/connection`),
  /** The rest of the turn as a stream, or 202 when another worker runs it. */
  answerElicitation: (id, answer) =>
    streamRequest(`/api/chats/${encodeURIComponent(id)}/elicitations`, answer),

  // the account: password, sessions, API keys, usage
  /** A 401 here is a wrong current password as often as an ended session: `me` tells which. */
  changePassword: (currentPassword, newPassword) =>
    request(
      "POST",
      "/api/auth/password",
      { current_password: currentPassword, new_password: newPassword },
      { quiet401: true },
    ),
  /** Whether the session still holds; a 401 goes back to the sign-in form, as anywhere else. */
  stillSignedIn: () => request("GET", "/api/auth/me"),
  sessions: () => request("GET", "/api/auth/sessions"),
  revokeSession: (id) => request("DELETE", `/api/auth/sessions/${encodeURIComponent(id)}`),
  logoutAll: () => request("POST", "/api/auth/logout-all", undefined, { quiet401: true }),
  keys: () => request("GET", "/api/keys"),
  /** Answers the key with `key` itself, which no later answer holds. */
  createKey: (name, expiresInDays) =>
    request("POST", "/api/keys", {
      name,
      ...(expiresInDays ? { expires_in_days: expiresInDays } : {}),
    }),
  revokeKey: (id) => request("DELETE", `/api/keys/${encodeURIComponent(id)}`),
  /** `range` is `{from, to}` as `YYYY-MM-DD` (UTC, `to` included). */
  usage: (range, groupBy) => request("GET", `/api/usage?${query({ ...range, group_by: groupBy })}`),

  // administration (admins only)
  adminUsers: (q, cursor) => request("GET", `/api/admin/users?${query({ limit: 50, q, cursor })}`),
  /** `changes` holds any of `is_admin`, `disabled`, `quota`; answers the user as it now is. */
  updateUser: (id, changes) => request("PATCH", `/api/admin/users/${encodeURIComponent(id)}`, changes),
  deleteUser: (id) => request("DELETE", `/api/admin/users/${encodeURIComponent(id)}`),
  adminUsage: (range, groupBy, userId) =>
    request("GET", `/api/admin/usage?${query({ ...range, group_by: groupBy, user_id: userId })}`),
};

/** A query string of the parameters that have a value. */
function query(params) {
  const kept = Object.entries(params).filter(([, value]) => value !== null && value !== undefined && value !== "");
  return new URLSearchParams(kept.map(([name, value]) => [name, String(value)])).toString();
}

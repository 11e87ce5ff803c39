// The page's controller: which view shows (sign-in or the app), the chat list, the open chat and
// its running turn, attachments and keys. State lives in one object; views are redrawn from it.
// The client uses only the public API (api.js), so it also shows a frontend author the way.

import { ApiError, api, upload, whenSignedOut } from "./api.js";
import { Log, asking } from "./conversation.js";
import { announce, clear, formatSize, h, itemAction } from "./dom.js";
import { adminPanel } from "./admin.js";
import { filesPanel, toolsPanel } from "./panels.js";
import { settingsPanel } from "./settings.js";
import { TurnFold, chunks, streamPosition } from "./stream.js";
import { usagePanel } from "./usage.js";

const $ = (id) => document.getElementById(id);

const state = {
  user: null,
  models: [],
  chats: [],
  nextCursor: null,
  chat: null, // the open chat: {id, title, model, ...}
  messages: [],
  running: false, // a turn of the open chat is streaming or running on the server
  pending: [], // attachments: {file, progress, upload, error}
  following: null, // the chat whose running turn this page is reading
  asked: null, // {chatId, lastId}: a turn waiting for a form this page has shown, not replayed
  retry: 0, // a timer asking again for a turn the server said runs but could not stream yet
  modelChange: null, // a model switch on its way to the server; a send waits for it
  switching: null, // a chat being opened or created; a send waits for it, to go where the reader is
  view: 0, // bumped by each navigation and send: a chat load that finishes late is dropped
};

const CAPABILITY_TEXT = {
  vision: "sees images",
  document: "reads PDFs",
  video: "watches video",
  tool_search: "deferred tool loading",
};

let log;

// ---- errors --------------------------------------------------------------------------------

function showError(error) {
  const message = error instanceof ApiError || error instanceof Error ? error.message : String(error);
  $("app-error").textContent = message;
  announce(message);
}

function clearError() {
  $("app-error").textContent = "";
}

async function attempt(action) {
  try {
    clearError();
    return await action();
  } catch (error) {
    if (error instanceof ApiError && error.status === 401) return undefined; // signed out
    showError(error);
    return undefined;
  }
}

// ---- sign in / sign up ---------------------------------------------------------------------

function showAuth(message = "") {
  stopRetry();
  state.user = null;
  state.chat = null;
  for (const dialog of document.querySelectorAll("dialog[open]")) dialog.close();
  $("app").hidden = true;
  $("auth").hidden = false;
  $("auth-error").textContent = message;
  $("auth-password").value = "";
  $("auth-email").focus();
}

async function submitAuth(event) {
  event.preventDefault();
  const action = event.submitter?.dataset.action || "login";
  const email = $("auth-email").value.trim();
  const password = $("auth-password").value;
  const name = $("auth-name").value.trim();
  const errorBox = $("auth-error");
  errorBox.textContent = "";
  if (!email || !password) {
    errorBox.textContent = "Enter your email and password.";
    return;
  }
  if (action === "register" && password.length < 8) {
    errorBox.textContent = "Choose a password of at least 8 characters.";
    return;
  }
  for (const button of $("auth-form").querySelectorAll("button")) button.disabled = true;
  try {
    const user =
      action === "register" ? await api.register(email, password, name) : await api.login(email, password);
    await showApp(user);
  } catch (error) {
    errorBox.textContent = error.message;
  } finally {
    for (const button of $("auth-form").querySelectorAll("button")) button.disabled = false;
  }
}

async function signOut() {
  try {
    await api.logout();
  } catch {
    // signed out either way
  }
  showAuth("You have signed out.");
}

// ---- the app -------------------------------------------------------------------------------

async function showApp(user) {
  state.user = user;
  $("auth").hidden = true;
  $("app").hidden = false;
  $("auth-form").reset();
  $("who").textContent = user.display_name || user.email;
  $("open-admin").hidden = !user.is_admin;
  $("app").setAttribute("aria-busy", "true");
  await attempt(async () => {
    state.models = await api.models();
    drawModels();
    await loadChats();
    if (state.chats.length) await openChat(state.chats[0].id);
    else startBlank();
  });
  $("app").setAttribute("aria-busy", "false");
  $("composer-input").focus();
  const connected = new URLSearchParams(location.search).get("connected");
  if (connected) {
    history.replaceState(null, "", "/"); // a reload does not say it again
    announce(`${connected} is connected with your account.`);
  }
}

function modelLabel(model) {
  const caps = model.capabilities.map((c) => CAPABILITY_TEXT[c] || c);
  let label = model.name || model.id;
  if (caps.length) label += ` — ${caps.join(", ")}`;
  if (!model.available) label += " (unavailable)";
  return label;
}

function drawModels() {
  const picker = $("model-picker");
  clear(picker);
  for (const model of state.models) {
    picker.append(
      h("option", { value: model.id, disabled: !model.available, text: modelLabel(model) }),
    );
  }
  const kept = state.models.find((m) => m.id === picker.dataset.choice && m.available);
  const preferred = state.chat?.model || kept?.id || state.models.find((m) => m.available)?.id;
  if (preferred) picker.value = preferred;
  describeModel();
}

function describeModel() {
  const model = state.models.find((m) => m.id === $("model-picker").value);
  if (!model) {
    $("model-caps").textContent = "";
    return;
  }
  const caps = model.capabilities.map((c) => CAPABILITY_TEXT[c] || c);
  $("model-caps").textContent = `${model.id}: ${caps.length ? caps.join(", ") : "text only"}${
    model.available ? "" : " — unavailable until its key or server is configured"
  }`;
}

async function changeModel() {
  describeModel();
  const model = $("model-picker").value;
  $("model-picker").dataset.choice = model;
  if (!state.chat || state.chat.model === model) return;
  const chatId = state.chat.id;
  state.modelChange = attempt(async () => {
    const updated = await api.updateChat(chatId, { model });
    if (state.chat?.id === chatId) state.chat = { ...state.chat, ...updated };
    announce(`This chat now uses ${model}.`);
  });
  await state.modelChange;
}

// ---- chat list -----------------------------------------------------------------------------

async function loadChats(more = false) {
  const page = await api.chats(more ? state.nextCursor : null);
  state.chats = more ? [...state.chats, ...page.items] : page.items;
  state.nextCursor = page.next_cursor;
  drawChats();
}

function drawChats() {
  const list = $("chat-list");
  clear(list);
  for (const chat of state.chats) list.append(chatItem(chat));
  $("more-chats").hidden = !state.nextCursor;
}

function chatItem(chat) {
  const title = chat.title || "Untitled chat";
  const current = state.chat?.id === chat.id;
  return h(
    "li",
    { class: current ? "current" : "" },
    h("button", {
      type: "button",
      class: "open-chat",
      "aria-current": current ? "page" : null,
      text: title,
      onclick: () => attempt(() => openChat(chat.id)),
    }),
    h(
      "span",
      { class: "chat-actions" },
      itemAction("Rename", title, (event) => renameForm(event.target.closest("li"), chat)),
      itemAction("Delete", title, (event) => confirmDelete(event.target.closest("li"), chat)),
    ),
  );
}

function renameForm(item, chat) {
  const input = h("input", { id: "rename-input", value: chat.title || "", maxlength: "200" });
  const form = h(
    "form",
    {
      class: "rename",
      onsubmit: (event) => {
        event.preventDefault();
        attempt(async () => {
          const updated = await api.updateChat(chat.id, { title: input.value.trim() });
          Object.assign(chat, updated);
          if (state.chat?.id === chat.id) {
            state.chat = { ...state.chat, ...updated };
            $("chat-title").textContent = updated.title || "Untitled chat";
          }
          drawChats();
        });
      },
    },
    h("label", { for: "rename-input", text: "Chat title" }),
    input,
    h("button", { type: "submit", text: "Save" }),
    h("button", { type: "button", class: "secondary", text: "Cancel", onclick: drawChats }),
  );
  clear(item);
  item.append(form);
  input.focus();
  input.select();
}

function confirmDelete(item, chat) {
  const title = chat.title || "Untitled chat";
  clear(item);
  item.append(
    h("span", { class: "confirm", text: `Delete “${title}”?` }),
    h("button", {
      type: "button",
      class: "danger",
      text: "Confirm delete",
      onclick: () =>
        attempt(async () => {
          await api.deleteChat(chat.id);
          state.chats = state.chats.filter((c) => c.id !== chat.id);
          if (state.chat?.id === chat.id) {
            if (state.chats.length) await openChat(state.chats[0].id);
            else startBlank();
          }
          drawChats();
          announce(`Deleted ${title}.`);
        }),
    }),
    h("button", { type: "button", class: "secondary", text: "Cancel", onclick: drawChats }),
  );
  item.querySelector("button").focus();
}

// ---- the open chat -------------------------------------------------------------------------

function startBlank() {
  stopRetry();
  state.chat = null;
  state.messages = [];
  $("chat-title").textContent = "New chat";
  log.show([], []);
  drawChatActions([]);
  setRunning(false);
  drawChats();
  drawModels();
}

function showChat(chat, activations) {
  state.chat = chat;
  state.messages = chat.messages;
  $("chat-title").textContent = chat.title || "Untitled chat";
  log.show(chat.messages, activations, chat.summaries);
  drawChatActions(activations);
  drawChats();
  drawModels();
  setRunning(Boolean(chat.running) || state.following === chat.id);
  if (chat.running && state.following !== chat.id && state.asked?.chatId !== chat.id) {
    followTurn(chat.id);
  }
}

/** Note a chat switch in flight: a message sent meanwhile goes to the chat it opens. */
function switching(work) {
  const promise = work();
  state.switching = promise.catch(() => {});
  return promise;
}

/** Wait until the chat and model a send goes to are the ones the reader chose last. */
async function settled() {
  for (;;) {
    const { switching: chat, modelChange: model } = state;
    await chat;
    await model;
    if (chat === state.switching && model === state.modelChange) return;
  }
}

async function openChat(id) {
  stopRetry();
  const view = ++state.view;
  await switching(async () => {
    const [chat, activations] = await Promise.all([api.chat(id), api.activations(id)]);
    if (view === state.view) showChat(chat, activations);
  });
}

/** Redraw the open chat from the server: after a turn ends, what is stored is the truth. */
async function reload() {
  if (!state.chat) return;
  const id = state.chat.id;
  const [chat, activations] = await Promise.all([api.chat(id), api.activations(id)]);
  if (state.chat?.id !== id) return;
  const listed = state.chats.find((c) => c.id === id);
  if (listed) Object.assign(listed, { title: chat.title, updated_at: chat.updated_at });
  state.chats.sort((a, b) => (a.updated_at < b.updated_at ? 1 : -1));
  showChat(chat, activations);
}

function drawChatActions(activations) {
  $("compact").hidden = state.messages.length < 2;
  $("reset-tools").hidden = !activations.length;
}

/** Summarise the chat's earlier messages now (the model then sees the summary instead). */
async function compact() {
  if (!state.chat || state.running) return;
  $("compact").disabled = true;
  await attempt(async () => {
    const done = await api.compact(state.chat.id);
    await reload();
    announce(`Messages up to ${done.covers_up_to_message_id} are summarised for the model.`);
  });
  $("compact").disabled = false;
}

/** Forget the chat's activated tool groups: later turns start with none. */
async function resetTools() {
  if (!state.chat || state.running) return;
  await attempt(async () => {
    await api.resetTools(state.chat.id);
    await reload();
    announce("Tool activations reset.");
  });
}

/**
 * Read the chat's running turn, which this page did not start: the page was opened or reloaded
 * in the middle of it, or another tab started it. The stream replays it from its start.
 */
async function followTurn(chatId) {
  stopRetry();
  let response;
  try {
    response = await api.follow(chatId);
  } catch {
    response = undefined;
  }
  if (state.chat?.id !== chatId || state.following === chatId) return response?.body?.cancel();
  if (!response) {
    // No stream (204: the turn has just ended, or it runs where this server cannot follow it):
    // show what is stored, and ask again in a while if the chat still says a turn runs.
    await reload().catch(showError);
    if (state.chat?.id === chatId && state.chat.running && !state.following) {
      state.retry = setTimeout(() => followTurn(chatId), 2000);
    }
    return;
  }
  await consume(response, chatId, { started: false });
}

function stopRetry() {
  if (state.retry) clearTimeout(state.retry);
  state.retry = 0;
}

/** Tabs of this browser tell each other when one starts a turn, so the others follow it. */
const tabs = "BroadcastChannel" in window ? new BroadcastChannel("hearth-turns") : null;
if (tabs) {
  tabs.onmessage = (event) => {
    const chatId = event.data?.chat;
    if (chatId && state.chat?.id === chatId && state.following !== chatId) followTurn(chatId);
  };
}

function setRunning(running) {
  state.running = running;
  $("stop").hidden = !running;
  $("send").disabled = running;
  $("model-picker").disabled = running;
  $("compact").disabled = running;
  $("reset-tools").disabled = running;
  log?.setBusy(running);
}

async function newChat() {
  const view = ++state.view;
  await attempt(() =>
    switching(async () => {
      const chat = await api.createChat($("model-picker").value || undefined);
      state.chats.unshift(chat);
      if (view !== state.view) return drawChats(); // the reader went elsewhere meanwhile
      stopRetry();
      showChat({ ...chat, messages: [], running: false }, []);
      $("composer-input").focus();
      announce("New chat started.");
    }),
  );
}

// ---- sending and streaming -----------------------------------------------------------------

const RECONNECTS = 6;
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Draw a turn's stream into chat `chatId`, for as long as that chat is the open one. A
 * connection that drops before `[DONE]` asks for the rest by itself (`Last-Event-ID`), a few
 * times, waiting longer each time; a stream this page started is announced to its other tabs.
 */
async function consume(response, chatId, { started = true } = {}) {
  if (state.chat?.id !== chatId) return response.body?.cancel(); // it runs on without a reader
  if (started) tabs?.postMessage({ chat: chatId });
  const redraw = () => log.show(state.messages, log.activations, state.chat?.summaries);
  const fold = new TurnFold(state.messages, (message) => log.changed(message), state.chat.model, redraw);
  const position = streamPosition();
  state.following = chatId;
  setRunning(true);
  let lost = false;
  try {
    for (let attempt = 0; response; ) {
      const before = position.lastId;
      try {
        for await (const chunk of chunks(response, position)) {
          if (state.chat?.id !== chatId) break; // the reader moved to another chat; it runs on
          fold.apply(chunk);
          if (chunk.type === "data-activation") {
            log.activations.push({ kind: "group", message_id: chunk.data.message_id, groups: chunk.data.groups });
          }
        }
      } catch {
        // the connection dropped: ask for the rest below
      }
      if (position.done || state.chat?.id !== chatId) break;
      if (position.lastId > before) attempt = 0; // it got somewhere: a fresh set of tries
      response = null;
      while (!response && attempt < RECONNECTS && state.chat?.id === chatId) {
        await sleep(Math.min(4000, 250 * 2 ** attempt));
        attempt += 1;
        try {
          response = await api.follow(chatId, position.lastId);
          if (!response) break; // 204: the turn has ended; what is stored is the rest
        } catch {
          response = null;
        }
      }
      lost = !response && attempt >= RECONNECTS;
    }
  } finally {
    if (state.following === chatId) state.following = null;
  }
  // A turn that waits for a form runs on, but its stream has ended: reading it again would only
  // replay the same events. The answer's own stream carries the rest.
  state.asked = fold.asked && position.done ? { chatId, lastId: position.lastId } : null;
  if (lost) showError("The connection dropped while the reply streamed; showing what was stored.");
  if (fold.error) showError(fold.error);
  if (state.chat?.id === chatId) {
    await reload();
    const asked = state.asked;
    if (asked?.chatId === chatId && state.chat?.id === chatId && state.chat.running) {
      // A sign-in is answered by the server's callback, and a form may have been answered in
      // another tab: the turn then goes on with no answer of this page's to carry the rest, so
      // read on after the `[DONE]` it handed over at.
      const formWaits = state.messages.some((m) => (m.tool_calls || []).some(asking));
      if (fold.signIn || !formWaits) {
        state.asked = null;
        const rest = await api.follow(chatId, asked.lastId).catch(() => null);
        if (rest) return consume(rest, chatId, { started: false });
        await reload();
      }
    }
    announce(
      fold.asked
        ? "A tool asks you to fill in a form."
        : fold.paused
          ? "A tool call waits for your approval."
          : "The reply is complete.",
    );
  }
}

async function send(event) {
  event?.preventDefault();
  if (state.running) return;
  const input = $("composer-input");
  const content = input.value.trim();
  if (state.pending.some((p) => !p.upload && !p.error)) {
    showError("Wait until the attachments have finished uploading.");
    return;
  }
  const attachments = state.pending.filter((p) => p.upload).map((p) => p.upload);
  if (!content && !attachments.length) {
    showError("Write a message or attach a file first.");
    input.focus();
    return;
  }
  await attempt(async () => {
    await settled();
    state.view += 1; // the turn's own stream draws this chat from now on
    if (!state.chat) {
      const chat = await api.createChat($("model-picker").value || undefined);
      state.chats.unshift(chat);
      state.chat = chat;
      state.messages = [];
      drawChats();
    }
    const chatId = state.chat.id;
    setRunning(true);
    let response;
    try {
      response = await api.send(chatId, content, attachments.map((a) => a.id));
    } catch (error) {
      setRunning(false);
      throw error;
    }
    input.value = "";
    state.pending = [];
    drawPending();
    const user = {
      id: null,
      role: "user",
      content,
      status: "ok",
      attachments,
      tool_calls: [],
      citations: [],
    };
    if (state.chat?.id === chatId) {
      state.messages.push(user);
      log.changed(user);
    }
    await consume(response, chatId);
  });
  setRunning(Boolean(state.chat?.running));
}

// ---- branches: edit, regenerate, switch ----------------------------------------------------

/** Start a turn that replaces what follows a point of the conversation: the page shows the
 * messages before it (and `added`), then the turn's stream. */
async function branchTurn(kept, added, request) {
  if (!state.chat || state.running) return;
  await attempt(async () => {
    await settled();
    state.view += 1;
    const chatId = state.chat.id;
    setRunning(true);
    let response;
    try {
      response = await request(chatId);
    } catch (error) {
      setRunning(false);
      throw error;
    }
    state.messages = added ? [...kept, added] : [...kept];
    log.show(state.messages, log.activations, state.chat.summaries);
    await consume(response, chatId);
  });
  setRunning(Boolean(state.chat?.running));
}

/** An edit is a send of the new text under the edited message's parent: a new branch. */
async function saveEdit(message, content) {
  const kept = state.messages.slice(0, state.messages.indexOf(message));
  const user = { id: null, role: "user", content, status: "ok", attachments: [], tool_calls: [], citations: [] };
  await branchTurn(kept, user, (chatId) =>
    api.send(chatId, content, [], { parent_id: message.parent_id ?? null }),
  );
}

/** A new answer to `question`; the old one stays, a page away. */
async function regenerate(question) {
  const kept = state.messages.slice(0, state.messages.indexOf(question) + 1);
  await branchTurn(kept, null, (chatId) => api.regenerate(chatId, question.id));
}

/** Show another version of a message: the branch through it. */
async function switchBranch(message, siblingId) {
  if (!state.chat || state.running) return;
  await attempt(async () => {
    const id = state.chat.id;
    const chat = await api.switchBranch(id, siblingId);
    const activations = await api.activations(id);
    if (state.chat?.id !== id) return;
    showChat(chat, activations);
    const versions = message.sibling_ids || [];
    announce(`Showing version ${versions.indexOf(siblingId) + 1} of ${versions.length}.`);
  });
}

async function stop() {
  if (!state.chat || !state.running) return;
  await attempt(async () => {
    try {
      await api.stop(state.chat.id);
      announce("Stopping the reply.");
    } catch (error) {
      if (!(error instanceof ApiError && error.status === 409)) throw error;
      await reload(); // it had already ended
    }
  });
}

async function decide(call, approved, note) {
  await attempt(async () => {
    const decision = { tool_call_id: call.tool_call_id, approved };
    if (note) decision.note = note;
    const chatId = state.chat.id;
    const response = await api.decide(chatId, [decision]);
    if (response.status === 202) {
      announce("Recorded; other tool calls still wait for you.");
      await reload();
    } else await consume(response, chatId); // the last answer resumes the turn: its stream follows
  });
}

/** Answer the form a tool's server asked for; the rest of the turn streams in. */
async function answerForm(call, action, content) {
  await attempt(async () => {
    const chatId = state.chat.id;
    const answer = { elicitation_id: call.elicitation.elicitation_id, action };
    if (content !== undefined) answer.content = content;
    const asked = state.asked?.chatId === chatId ? state.asked : null;
    const response = await api.answerElicitation(chatId, answer);
    state.asked = null;
    if (response.status === 202) {
      // Another worker runs the turn: read its continuation, after the form's `[DONE]`.
      announce("Answer sent; the turn goes on.");
      const rest = asked ? await api.follow(chatId, asked.lastId).catch(() => null) : null;
      if (rest) await consume(rest, chatId, { started: false });
      else await reload();
    } else await consume(response, chatId);
  });
}

// ---- attachments ---------------------------------------------------------------------------

function addFiles(files) {
  const batch = [...files].map((file) => ({ file, progress: 0, upload: null, error: null }));
  if (!batch.length) return;
  state.pending.push(...batch);
  drawPending();
  upload(
    batch.map((p) => p.file),
    state.chat?.id,
    (fraction) => {
      for (const p of batch) p.progress = fraction;
      drawPending();
    },
  ).then(
    (uploads) => {
      batch.forEach((p, i) => {
        p.upload = uploads[i];
        p.progress = 1;
      });
      drawPending();
      announce(`${uploads.length} file${uploads.length === 1 ? "" : "s"} attached.`);
    },
    (error) => {
      for (const p of batch) p.error = error.message;
      drawPending();
      if (!(error instanceof ApiError && error.status === 401)) showError(error);
    },
  );
}

function drawPending() {
  const list = $("pending-files");
  clear(list);
  for (const pending of state.pending) {
    const name = pending.file.name;
    let body;
    if (pending.error) body = h("span", { class: "error", text: `${name}: ${pending.error}` });
    else if (pending.upload && pending.upload.mime.startsWith("image/") && pending.upload.mime !== "image/svg+xml") {
      body = h(
        "a",
        { href: pending.upload.url, target: "_blank", rel: "noopener", class: "file thumb" },
        h("img", { src: pending.upload.url, alt: name }),
      );
    } else if (pending.upload) {
      body = h("span", { class: "file-name", text: `${name} (${formatSize(pending.upload.size)})` });
    } else {
      body = h(
        "span",
        {},
        h("span", { class: "file-name", text: name }),
        h("progress", {
          max: "100",
          value: String(Math.round(pending.progress * 100)),
          "aria-label": `Uploading ${name}`,
        }),
      );
    }
    list.append(
      h(
        "li",
        { class: "pending-file" },
        body,
        h("button", {
          type: "button",
          class: "link",
          "aria-label": `Remove ${name}`,
          text: "×",
          onclick: () => {
            state.pending = state.pending.filter((p) => p !== pending);
            drawPending();
          },
        }),
      ),
    );
  }
}

// ---- wiring --------------------------------------------------------------------------------

function keys(event) {
  if (event.key === "Escape" && state.running) {
    event.preventDefault();
    stop();
  }
}

function composerKeys(event) {
  if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
    event.preventDefault();
    send();
  }
}

function dropZone(element) {
  element.addEventListener("dragover", (event) => {
    if (!event.dataTransfer?.types.includes("Files")) return;
    event.preventDefault();
    element.classList.add("dragging");
  });
  element.addEventListener("dragleave", () => element.classList.remove("dragging"));
  element.addEventListener("drop", (event) => {
    element.classList.remove("dragging");
    if (!event.dataTransfer?.files.length) return;
    event.preventDefault();
    addFiles(event.dataTransfer.files);
  });
}

async function boot() {
  log = new Log($("log"), {
    onDecide: decide,
    onElicit: answerForm,
    onSave: saveEdit,
    onRegenerate: regenerate,
    onSwitch: switchBranch,
  });
  whenSignedOut(() => showAuth("Your session has ended. Sign in again to continue."));
  $("auth-form").addEventListener("submit", submitAuth);
  $("sign-out").addEventListener("click", signOut);
  $("new-chat").addEventListener("click", newChat);
  $("more-chats").addEventListener("click", () => attempt(() => loadChats(true)));
  $("model-picker").addEventListener("change", changeModel);
  $("composer").addEventListener("submit", send);
  $("composer-input").addEventListener("keydown", composerKeys);
  $("stop").addEventListener("click", stop);
  $("compact").addEventListener("click", compact);
  $("reset-tools").addEventListener("click", resetTools);
  $("open-files").addEventListener("click", filesPanel($("files-dialog")));
  $("open-tools").addEventListener("click", toolsPanel($("tools-dialog")));
  $("open-usage").addEventListener("click", usagePanel($("usage-dialog")));
  $("open-settings").addEventListener(
    "click",
    settingsPanel($("settings-dialog"), {
      onEverywhere: () => showAuth("You have signed out everywhere."),
    }),
  );
  $("open-admin").addEventListener("click", adminPanel($("admin-dialog"), { me: () => state.user }));
  $("attach").addEventListener("click", () => $("file-input").click());
  $("file-input").addEventListener("change", (event) => {
    addFiles(event.target.files);
    event.target.value = "";
  });
  document.addEventListener("keydown", keys);
  // A tab shown again looks at its chat: a turn another device started there is followed.
  document.addEventListener("visibilitychange", () => {
    if (!document.hidden && state.chat && !state.following) reload().catch(() => {});
  });
  dropZone(document.querySelector(".main"));
  try {
    await showApp(await api.me());
  } catch {
    showAuth();
  }
}

boot();

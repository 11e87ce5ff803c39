// Drawing messages. One function turns a message (stored, or folded live from the stream; both
// have the API's shape) into an <article>; the log keeps an article per message object and
// redraws only the messages that changed, at most once per animation frame, so a long chat
// stays cheap while a reply streams in.

import { renderDiff } from "./diff.js";
import { clear, formatSize, h } from "./dom.js";
import { elicitationForm } from "./elicitation.js";
import { renderMarkdown } from "./markdown.js";

const STATUS_TEXT = {
  streaming: "writing…",
  ok: "",
  failed: "failed",
  cancelled: "stopped",
  incomplete: "incomplete",
};

const CALL_STATUS_TEXT = {
  running: "running",
  pending: "waiting for your approval",
  done: "done",
  failed: "failed",
  cancelled: "cancelled",
  rejected: "rejected",
};

function isImage(mime) {
  return typeof mime === "string" && mime.startsWith("image/") && mime !== "image/svg+xml";
}

/** A thumbnail (images) or a file link that opens the `/data` URL in a new tab. */
export function fileLink(file, label) {
  const name = label || file.filename || (file.path || "").split("/").pop() || "file";
  const link = h("a", { href: file.url, target: "_blank", rel: "noopener", class: "file" });
  if (isImage(file.mime)) {
    link.classList.add("thumb");
    link.append(h("img", { src: file.url, alt: name, loading: "lazy" }));
  } else {
    link.append(h("span", { class: "file-name", text: name }));
    if (file.size !== undefined) link.append(h("span", { class: "file-size", text: formatSize(file.size) }));
  }
  return link;
}

function pretty(value) {
  if (value === null || value === undefined) return "";
  if (typeof value === "string") return value;
  return JSON.stringify(value, null, 2);
}

function approvalForm(call, onDecide) {
  const noteId = `note-${call.tool_call_id}`.replace(/[^\w-]/g, "_");
  const note = h("textarea", { id: noteId, rows: "2", class: "note" });
  const decide = (approved) => (event) => {
    event.preventDefault();
    for (const button of form.querySelectorAll("button")) button.disabled = true;
    onDecide(call, approved, note.value.trim());
  };
  const form = h(
    "form",
    { class: "approval", "aria-label": `Approve or reject ${call.name}` },
    h("label", { for: noteId, text: "Note (optional, sent with a rejection or approval)" }),
    note,
    h(
      "div",
      { class: "row" },
      h("button", { type: "button", onclick: decide(true), text: "Approve" }),
      h("button", { type: "button", class: "danger", onclick: decide(false), text: "Reject" }),
    ),
  );
  return form;
}

/** Whether the call's server waits for the user to fill in its form. */
export function asking(call) {
  const asked = call.elicitation;
  return call.status === "running" && asked && asked.mode !== "url" && !asked.action;
}

/** Where the call's server wants the user to sign in again, while the call waits for it. */
function signInWanted(call) {
  if (call.status !== "running") return null;
  if (call.authorization) return call.authorization;
  const asked = call.elicitation;
  if (asked && asked.mode === "url" && !asked.action) {
    return { group: call.name.split("__")[1] || call.name, url: asked.url };
  }
  return null;
}

/** A server that wants the user to sign in again (a wider scope) before the call goes on. */
function signInAgain({ group, url }) {
  return h(
    "p",
    { class: "row sign-in" },
    h("span", { text: `${group} asks you to sign in again to go on.` }),
    h("a", { href: url, class: "button", text: `Sign in to ${group}` }),
  );
}

function toolCall(call, options) {
  const waits = asking(call) || signInWanted(call);
  const status = waits ? "waiting for you" : CALL_STATUS_TEXT[call.status] || call.status;
  const open = call.status === "pending" || waits;
  const details = h(
    "details",
    { class: `tool tool-${call.status}`, open, "data-key": `tool-${call.tool_call_id}` },
    h(
      "summary",
      {},
      h("span", { class: "tool-name", text: call.name }),
      " ",
      h("span", { class: `badge badge-${call.status}`, text: status }),
    ),
    h("p", { class: "label", text: "Arguments" }),
    h("pre", { class: "args", text: pretty(call.arguments) }),
  );
  if (call.preview_new !== null && call.preview_new !== undefined) {
    details.append(
      h("p", { class: "label", text: call.preview_old === null ? "New file" : "Changes" }),
      renderDiff(call.preview_old, call.preview_new),
    );
  }
  if (call.result !== null && call.result !== undefined && call.result !== "") {
    details.append(
      h("p", { class: "label", text: call.status === "failed" ? "Error" : "Result" }),
      h("pre", { class: "result", text: pretty(call.result) }),
    );
  }
  if (call.media && call.media.length) {
    details.append(h("div", { class: "thumbs" }, call.media.map((file) => fileLink(file))));
  }
  if (call.status === "pending" && options.onDecide) {
    details.append(approvalForm(call, options.onDecide));
  }
  if (asking(call) && options.onElicit) details.append(elicitationForm(call, options.onElicit));
  const signIn = signInWanted(call);
  if (signIn) details.append(signInAgain(signIn));
  return details;
}

function citationList(citations) {
  return h(
    "section",
    { class: "citations", "aria-label": "Sources" },
    h("p", { class: "label", text: "Sources" }),
    h(
      "ol",
      {},
      citations.map((citation, index) =>
        h(
          "li",
          {},
          h(
            "details",
            { "data-key": `cite-${index}` },
            h(
              "summary",
              {},
              `[${index + 1}] ${citation.filename}`,
              citation.page ? `, page ${citation.page}` : "",
            ),
            h("blockquote", { text: citation.quote }),
          ),
        ),
      ),
    ),
  );
}

/** `‹ 2 / 3 ›`: the message's place among its alternatives, and buttons to the others. */
function pager(message, onSwitch) {
  const ids = message.sibling_ids || [];
  const at = ids.indexOf(message.id);
  if (ids.length < 2 || at < 0) return null;
  const go = (offset, label, text) =>
    h("button", {
      type: "button",
      class: "pager-step",
      "aria-label": label,
      disabled: !onSwitch || !ids[at + offset],
      onclick: () => onSwitch(message, ids[at + offset]),
      text,
    });
  return h(
    "span",
    { class: "pager", role: "group", "aria-label": "Versions" },
    go(-1, "Previous version", "‹"),
    h("span", { class: "pager-at", text: `${at + 1} / ${ids.length}` }),
    go(1, "Next version", "›"),
  );
}

/** The inline editor of a user message: saving sends the new text under the same parent. */
function editForm(message, onSave, onCancel) {
  const input = h("textarea", { class: "edit-input", rows: "3", "aria-label": "Edit your message" });
  input.value = message.content;
  const save = (event) => {
    event.preventDefault();
    const content = input.value.trim();
    if (content) onSave(message, content);
  };
  input.addEventListener("keydown", (event) => {
    if (event.key === "Escape") {
      event.preventDefault();
      onCancel(message);
    } else if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) save(event);
  });
  const form = h(
    "form",
    { class: "edit", onsubmit: save },
    input,
    h(
      "div",
      { class: "row" },
      h("button", { type: "submit", text: "Save and send" }),
      h("button", { type: "button", onclick: () => onCancel(message), text: "Cancel" }),
    ),
  );
  queueMicrotask(() => input.focus());
  return form;
}

/** Edit, Regenerate and the pager, for a stored message while no turn runs. */
function branchActions(message, options) {
  if (message.id === null || message.id === undefined) return null;
  const idle = !options.busy;
  const actions = h("span", { class: "actions" });
  const pages = pager(message, idle ? options.onSwitch : null);
  if (pages) actions.append(pages);
  if (idle && message.role === "user" && options.onEdit) {
    actions.append(
      h("button", { type: "button", class: "link", onclick: () => options.onEdit(message), text: "Edit" }),
    );
  }
  if (idle && options.question && options.onRegenerate) {
    actions.append(
      h("button", {
        type: "button",
        class: "link",
        onclick: () => options.onRegenerate(options.question),
        text: "Regenerate",
      }),
    );
  }
  return actions.childElementCount ? actions : null;
}

/**
 * One message as an article. `options.activations` are the groups this message activated,
 * `options.onDecide(call, approved, note)` answers an approval, `options.onElicit(call,
 * action, content)` the form a call's server asks for; `options.onEdit`, `onRegenerate`,
 * `onSwitch` and `onSave` the branch actions (`options.question`: the user message whose
 * answer this message ends, where it ends one; `options.editing`: the editor shows).
 */
export function messageArticle(message, options = {}) {
  const who = message.role === "user" ? "You" : message.model || "Assistant";
  const status = message.status in STATUS_TEXT ? STATUS_TEXT[message.status] : message.status || "";
  const article = h(
    "article",
    {
      class: `message ${message.role} status-${message.status}`,
      "aria-label": `${message.role === "user" ? "You" : "Assistant"}${status ? `, ${status}` : ""}`,
      "data-message-id": message.id ?? "",
    },
    h(
      "header",
      {},
      h("span", { class: "who", text: who }),
      status ? h("span", { class: `badge badge-${message.status}`, text: status }) : null,
      branchActions(message, options),
    ),
  );
  if (options.editing) {
    article.append(editForm(message, options.onSave, options.onCancelEdit));
    return article;
  }
  if (message.reasoning) {
    article.append(
      h(
        "details",
        { class: "reasoning", "data-key": "reasoning" },
        h("summary", { text: "Reasoning" }),
        h("div", { class: "markdown" }, renderMarkdown(message.reasoning)),
      ),
    );
  }
  if (message.content) {
    article.append(h("div", { class: "markdown body" }, renderMarkdown(message.content)));
  }
  if (message.attachments && message.attachments.length) {
    article.append(
      h(
        "div",
        { class: "thumbs", "aria-label": "Attachments" },
        message.attachments.map((file) => fileLink(file)),
      ),
    );
  }
  for (const call of message.tool_calls || []) article.append(toolCall(call, options));
  const groups = (options.activations || []).flatMap((a) => a.groups || [a.ref]);
  if (groups.length) {
    article.append(
      h(
        "ul",
        { class: "chips", "aria-label": "Activated tools" },
        groups.map((group) => h("li", { class: "chip", text: group })),
      ),
    );
  }
  if (message.citations && message.citations.length) article.append(citationList(message.citations));
  if (message.citation_status === "ungrounded") {
    article.append(h("p", { class: "hint", text: "No cited passage supports this answer." }));
  }
  if (message.error) article.append(h("p", { class: "error", text: message.error }));
  return article;
}

function summaryNote(summary) {
  return h(
    "details",
    { class: "summary-note" },
    h("summary", { text: "Summary of the messages above (the model reads this instead of them)" }),
    h("div", { class: "markdown" }, renderMarkdown(summary.content)),
  );
}

/** What the reader opened or closed stays so when a streaming message is redrawn. */
function keepOpenState(old, fresh) {
  const state = new Map();
  for (const details of old.querySelectorAll("details[data-key]")) {
    state.set(details.dataset.key, details.open);
  }
  for (const details of fresh.querySelectorAll("details[data-key]")) {
    if (state.has(details.dataset.key) && details.dataset.key !== "") {
      details.open = state.get(details.dataset.key) || details.open;
    }
  }
}

/** The conversation log: an article per message object, redrawn when it changes. */
export class Log {
  constructor(element, options) {
    this.element = element;
    this.options = options;
    this.articles = new Map();
    this.dirty = new Set();
    this.frame = 0;
    this.activations = [];
    this.questions = new Map(); // the last message of each answer -> its user message
    this.editing = null;
    this.busy = false;
  }

  /** Which messages end an answer, and to which question: where "Regenerate" goes. */
  noteTurns(messages) {
    this.questions = new Map();
    let question = null;
    messages.forEach((message, index) => {
      if (message.role === "user") question = message;
      const next = messages[index + 1];
      if (message.role === "assistant" && question && (!next || next.role === "user")) {
        this.questions.set(message, question);
      }
    });
  }

  /** Open (or close, with null) the inline editor of a user message. */
  edit(message) {
    const previous = this.editing;
    this.editing = message;
    if (previous) this.changed(previous);
    if (message) this.changed(message);
  }

  /** No branch action while a turn streams: the chat's path must not move under it. */
  setBusy(busy) {
    if (busy === this.busy) return;
    this.busy = busy;
    for (const message of this.articles.keys()) this.changed(message);
  }

  activationsFor(message) {
    return this.activations.filter((a) => a.message_id === message.id && message.id !== null);
  }

  draw(message) {
    return messageArticle(message, {
      activations: this.activationsFor(message),
      onDecide: this.options.onDecide,
      onElicit: this.options.onElicit,
      onEdit: (edited) => this.edit(edited),
      onCancelEdit: () => this.edit(null),
      onSave: this.options.onSave,
      onRegenerate: this.options.onRegenerate,
      onSwitch: this.options.onSwitch,
      question: this.questions.get(message),
      editing: this.editing === message,
      busy: this.busy,
    });
  }

  /** Draw a whole conversation afresh; each summary follows the last message it covers. */
  show(messages, activations, summaries = []) {
    this.activations = activations || [];
    this.editing = null;
    this.noteTurns(messages);
    this.articles.clear();
    this.dirty.clear();
    clear(this.element);
    if (!messages.length) {
      this.element.append(
        h("p", { class: "empty", text: "No messages yet. Write one below to start." }),
      );
    }
    for (const message of messages) {
      const article = this.draw(message);
      this.articles.set(message, article);
      this.element.append(article);
      for (const summary of summaries) {
        if (summary.covers_up_to_message_id === message.id) this.element.append(summaryNote(summary));
      }
    }
    this.scroll(true);
  }

  /** Mark a message as changed; it is redrawn on the next animation frame. */
  changed(message) {
    this.dirty.add(message);
    if (!this.frame) this.frame = requestAnimationFrame(() => this.flush());
  }

  flush() {
    this.frame = 0;
    const nearBottom = this.atBottom();
    for (const message of this.dirty) {
      const article = this.draw(message);
      const old = this.articles.get(message);
      if (old) {
        keepOpenState(old, article);
        old.replaceWith(article);
      }
      else {
        this.element.querySelector(".empty")?.remove();
        this.element.append(article);
      }
      this.articles.set(message, article);
    }
    this.dirty.clear();
    if (nearBottom) this.scroll(true);
  }

  atBottom() {
    const el = this.element;
    return el.scrollHeight - el.scrollTop - el.clientHeight < 80;
  }

  scroll(force) {
    if (force) this.element.scrollTop = this.element.scrollHeight;
  }
}

// Reading the Vercel AI SDK UI message stream without the SDK: `data: {json}` events, one per
// blank-line-separated block, each with its `id:` (its number in the turn), ending with
// `data: [DONE]`. The reader's `position` keeps the last id seen and whether `[DONE]` came, so
// a dropped connection can ask for the rest with `Last-Event-ID`. `TurnFold` folds the chunks into
// messages of the same shape `GET /api/chats/{id}` answers (each model round its own assistant
// message, tool calls under it), so one renderer draws both the live turn and stored history.

/** Where a reader of a turn's stream stands: the last event id it got, and whether it ended. */
export function streamPosition() {
  return { lastId: 0, done: false };
}

/** Yields each chunk of a UI message stream response as a parsed object. */
export async function* chunks(response, position = streamPosition()) {
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += value.replace(/\r\n/g, "\n");
      let cut;
      while ((cut = buffer.indexOf("\n\n")) >= 0) {
        const block = buffer.slice(0, cut);
        buffer = buffer.slice(cut + 2);
        const id = block.split("\n").find((line) => line.startsWith("id:"));
        if (id) position.lastId = Number(id.slice(3).trim()) || position.lastId;
        const data = block
          .split("\n")
          .filter((line) => line.startsWith("data:"))
          .map((line) => line.slice(5).trimStart())
          .join("\n");
        if (!data) continue;
        if (data === "[DONE]") {
          position.done = true;
          return;
        }
        try {
          yield JSON.parse(data);
        } catch {
          // a malformed event is skipped; the reload after the turn shows the stored truth
        }
      }
    }
  } finally {
    reader.cancel().catch(() => {}); // a reader that stops early lets the response go
  }
}

export function assistantMessage(id, model) {
  return {
    id,
    role: "assistant",
    content: "",
    reasoning: null,
    status: "streaming",
    error: null,
    model,
    attachments: [],
    tool_calls: [],
    citations: [],
    citation_status: null,
  };
}

export class TurnFold {
  /**
   * @param {object[]} messages the conversation, changed in place
   * @param {(message: object) => void} changed called with each message that changed
   * @param {string} model the chat's model id, shown on new rounds
   * @param {() => void} redraw called when messages were taken out: a turn followed from its
   *   start (a reload, another tab) replaces what the page had drawn of it
   */
  constructor(messages, changed, model, redraw = () => {}) {
    this.messages = messages;
    this.changed = changed;
    this.redraw = redraw;
    this.model = model;
    this.current = null;
    this.activations = [];
    this.error = null;
    this.paused = false;
    this.asked = false; // the stream handed over to a form or a sign-in
    this.signIn = false; // ... a sign-in, which the server's callback answers, not this page
  }

  round() {
    if (!this.current) {
      this.current = assistantMessage(null, this.model);
      this.messages.push(this.current);
    }
    return this.current;
  }

  call(toolCallId) {
    for (let i = this.messages.length - 1; i >= 0; i -= 1) {
      const found = this.messages[i].tool_calls.find((c) => c.tool_call_id === toolCallId);
      if (found) return [this.messages[i], found];
    }
    return [null, null];
  }

  apply(chunk) {
    const handler = HANDLERS[chunk.type];
    if (handler) handler(this, chunk);
  }
}

function touchCall(fold, chunk, update) {
  let [message, call] = fold.call(chunk.toolCallId);
  if (!call) {
    message = fold.round();
    call = {
      id: null,
      tool_call_id: chunk.toolCallId,
      name: chunk.toolName || "tool",
      arguments: null,
      status: "running",
      result: null,
      preview_old: null,
      preview_new: null,
      media: [],
    };
    message.tool_calls.push(call);
  }
  update(call);
  fold.changed(message);
}

const HANDLERS = {
  "data-user-message": (fold, chunk) => {
    const user = fold.messages.findLast((m) => m.role === "user" && m.id === null);
    if (user) {
      user.id = chunk.data.id;
      fold.changed(user);
      return;
    }
    // A turn followed from its start: what the page had of it is drawn again from the stream.
    const at = fold.messages.findIndex((m) => m.id === chunk.data.id);
    if (at >= 0 && at < fold.messages.length - 1) {
      fold.messages.splice(at + 1);
      fold.redraw();
    }
  },
  "data-assistant-message": (fold, chunk) => {
    const stored = fold.messages.findIndex((m) => m.id === chunk.data.id);
    if (stored >= 0) {
      fold.messages.splice(stored); // the stored part of a round the stream now replays
      fold.current = null;
      fold.redraw();
    }
    if (fold.current && fold.current.status === "streaming") fold.current.status = "ok";
    if (fold.current) fold.changed(fold.current);
    fold.current = assistantMessage(chunk.data.id, fold.model);
    fold.messages.push(fold.current);
    fold.changed(fold.current);
  },
  "start-step": (fold) => fold.changed(fold.round()),
  "text-delta": (fold, chunk) => {
    const message = fold.round();
    message.content += chunk.delta;
    fold.changed(message);
  },
  "reasoning-delta": (fold, chunk) => {
    const message = fold.round();
    message.reasoning = (message.reasoning || "") + chunk.delta;
    fold.changed(message);
  },
  "tool-input-start": (fold, chunk) => touchCall(fold, chunk, () => {}),
  "tool-input-delta": (fold, chunk) =>
    touchCall(fold, chunk, (call) => {
      call.arguments = (typeof call.arguments === "string" ? call.arguments : "") +
        chunk.inputTextDelta;
    }),
  "tool-input-available": (fold, chunk) =>
    touchCall(fold, chunk, (call) => {
      call.arguments = chunk.input;
    }),
  "tool-input-error": (fold, chunk) =>
    touchCall(fold, chunk, (call) => {
      call.status = "failed";
      call.result = chunk.errorText;
    }),
  "tool-output-available": (fold, chunk) =>
    touchCall(fold, chunk, (call) => {
      call.status = "done";
      call.result = chunk.output;
    }),
  "tool-output-error": (fold, chunk) =>
    touchCall(fold, chunk, (call) => {
      call.status = "failed";
      call.result = chunk.errorText;
    }),
  "tool-approval-request": (fold, chunk) => {
    fold.paused = true;
    touchCall(fold, chunk, (call) => {
      call.status = "pending";
    });
  },
  "data-elicitation": (fold, chunk) => {
    fold.asked = true;
    if (chunk.data.mode === "url") fold.signIn = true;
    touchCall(fold, { toolCallId: chunk.data.tool_call_id }, (call) => {
      call.elicitation = { ...chunk.data, action: null, content: null };
    });
  },
  "data-authorization": (fold, chunk) => {
    fold.asked = true;
    fold.signIn = true;
    touchCall(fold, { toolCallId: chunk.data.tool_call_id }, (call) => {
      call.authorization = { group: chunk.data.group, url: chunk.data.url };
    });
  },
  "tool-output-denied": (fold, chunk) =>
    touchCall(fold, chunk, (call) => {
      call.status = "rejected";
    }),
  "data-activation": (fold, chunk) => {
    fold.activations.push(chunk.data);
    const message = fold.messages.find((m) => m.id === chunk.data.message_id);
    if (message) fold.changed(message);
  },
  "data-citations": (fold, chunk) => {
    const message = fold.messages.find((m) => m.id === chunk.data.message_id);
    if (message) {
      message.citations = chunk.data.citations;
      fold.changed(message);
    }
  },
  error: (fold, chunk) => {
    fold.error = chunk.errorText || "The turn failed.";
    const message = fold.round();
    message.status = "failed";
    message.error = fold.error;
    fold.changed(message);
  },
  abort: (fold) => {
    if (fold.current) {
      fold.current.status = "cancelled";
      fold.changed(fold.current);
    }
  },
  finish: (fold) => {
    // A form ends the response, not the round: the call still runs while the user answers.
    if (fold.current && fold.current.status === "streaming" && !fold.asked) {
      fold.current.status = "ok";
      fold.changed(fold.current);
    }
  },
};

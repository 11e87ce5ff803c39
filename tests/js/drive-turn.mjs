#!/usr/bin/env node
// Drives one hearth turn the way a browser frontend does, with the official AI SDK client.
//
// The chat runs on the SDK's own pieces: `AbstractChat` (the class under `useChat`, here with
// a plain in-memory state instead of React's) sends through `DefaultChatTransport`, whose
// `prepareSendMessagesRequest` turns the SDK's message list into hearth's request body. The
// transport parses the SSE answer with `parseJsonEventStream` and the SDK's
// `uiMessageChunkSchema`, and `processUIMessageStream` folds the chunks into a UIMessage.
//
// The transport stops at the first chunk that fails the schema, so the response body is also
// teed into a second `parseJsonEventStream` with the same schema: that copy records every
// chunk as it came over the wire and every schema failure, not just the first.
//
// With `--regenerate`, once the turn has ended the SDK's `regenerate()` asks for a new answer:
// `prepareSendMessagesRequest` sees `trigger: 'regenerate-message'` and sends hearth's
// `/regenerate` with the question's hearth id, read off the answer's `data-user-message` part
// and passed in the call's `body` (docs/http-api.md, "The stream").
//
// With `--resume`, nothing is sent: a chat that has just been opened (a reload in the middle of a
// turn) calls `resumeStream()`, whose `prepareReconnectToStreamRequest` points the transport at
// hearth's `GET /api/chats/{id}/stream`; the SDK folds the running turn from its `start`.
//
// Usage:
//   node drive-turn.mjs --base-url http://127.0.0.1:8000 --cookie 'hearth_session=...; ...' \
//     --csrf TOKEN --chat-id CHAT_ID --content 'Hello' [--regenerate | --resume]
//
// Prints one JSON object: {response, chunks, done, message, messages, status, errors, requests}
// (with `--regenerate`, also `first`: the chunks of the first turn; `chunks` are the new
// answer's). `requests` lists each request the transport made: `{url, body}`.
// `chunks` are the JSON events as sent (`[DONE]` excluded; `done` says it ended the body),
// `message` is the folded assistant UIMessage, and each entry of `errors` names its source:
// `schema` (a chunk failing `uiMessageChunkSchema`, with its index), `chat` (the transport or
// the fold failed), `audit`, `timeout` or `script`.
// Exits 1 when a chunk fails the schema, the transport or the fold fails, or the turn does
// not end with the chat ready; exits 2 on bad arguments.

import { parseArgs } from 'node:util';
import {
  AbstractChat,
  DefaultChatTransport,
  parseJsonEventStream,
  uiMessageChunkSchema,
} from 'ai';

function readOptions() {
  const { values } = parseArgs({
    options: {
      'base-url': { type: 'string' },
      cookie: { type: 'string', default: '' },
      csrf: { type: 'string', default: '' },
      'chat-id': { type: 'string' },
      content: { type: 'string' },
      'timeout-ms': { type: 'string', default: '60000' },
      regenerate: { type: 'boolean', default: false },
      resume: { type: 'boolean', default: false },
    },
    strict: true,
  });
  for (const name of ['base-url', 'chat-id', ...(values.resume ? [] : ['content'])]) {
    if (values[name] === undefined) {
      process.stderr.write(`missing --${name}\n`);
      process.exit(2);
    }
  }
  return values;
}

/** A `ChatState` kept in plain arrays: what `@ai-sdk/react` keeps in React state. */
class MemoryChatState {
  constructor() {
    this.status = 'ready';
    this.error = undefined;
    this.messages = [];
  }

  pushMessage(message) {
    this.messages = this.messages.concat(message);
  }

  popMessage() {
    this.messages = this.messages.slice(0, -1);
  }

  replaceMessage(index, message) {
    this.messages = [
      ...this.messages.slice(0, index),
      this.snapshot(message),
      ...this.messages.slice(index + 1),
    ];
  }

  snapshot(thing) {
    return structuredClone(thing);
  }
}

class TurnChat extends AbstractChat {
  constructor(init) {
    super({ ...init, state: new MemoryChatState() });
  }
}

/** Hearth's send body from the SDK's messages: the text of the last user message. */
function hearthBody(messages) {
  const lastUser = messages.findLast((message) => message.role === 'user');
  const content = (lastUser?.parts ?? [])
    .filter((part) => part.type === 'text')
    .map((part) => part.text)
    .join('');
  return { content, attachments: [] };
}

/**
 * Schema issues worth reading: of a union's branches, those whose `type` matched the chunk
 * (a branch that failed on `type` itself only says the chunk is some other kind).
 */
function relevantIssues(issues) {
  return issues.flatMap((issue) => {
    if (issue.code !== 'invalid_union' || !Array.isArray(issue.errors)) {
      return [{ path: issue.path, message: issue.message }];
    }
    const matching = issue.errors.filter(
      (branch) => !branch.some((inner) => inner.path?.length === 1 && inner.path[0] === 'type'),
    );
    return matching.length > 0
      ? matching.flatMap(relevantIssues)
      : [{ path: ['type'], message: 'no chunk type of the schema matches' }];
  });
}

function describeError(error) {
  if (!(error instanceof Error)) return { message: String(error) };
  if (Array.isArray(error.issues)) {
    return { name: error.name, issues: relevantIssues(error.issues) };
  }
  const described = { name: error.name, message: error.message.split('\n')[0] };
  if (error.cause !== undefined) {
    described.cause = describeError(error.cause);
  }
  return described;
}

async function main() {
  const options = readOptions();
  const base = options['base-url'].replace(/\/+$/, '');
  const chatPath = `${base}/api/chats/${encodeURIComponent(options['chat-id'])}`;
  const api = `${chatPath}/messages`;

  const chunks = [];
  const errors = [];
  const requests = [];
  let response;
  let audit = Promise.resolve();
  let done = false;

  // Node's fetch keeps no cookies, so the Cookie header goes along with the CSRF header.
  // The wrapper hands the SDK one branch of the body and audits the other.
  const auditingFetch = async (input, init) => {
    requests.push({ url: String(input), body: JSON.parse(init?.body ?? 'null') });
    const answer = await globalThis.fetch(input, init);
    response = {
      status: answer.status,
      contentType: answer.headers.get('content-type'),
      uiMessageStream: answer.headers.get('x-vercel-ai-ui-message-stream'),
    };
    if (!answer.ok || answer.body === null) return answer;
    const [forSdk, forAudit] = answer.body.tee();
    const [forSchema, forText] = forAudit.tee();
    const recordFailure = (error) => errors.push({ source: 'audit', error: describeError(error) });
    audit = Promise.all([
      (async () => {
        const parsed = parseJsonEventStream({ stream: forSchema, schema: uiMessageChunkSchema });
        for await (const result of parsed) {
          chunks.push(result.rawValue);
          if (!result.success) {
            errors.push({
              source: 'schema',
              index: chunks.length - 1,
              chunk: result.rawValue,
              error: describeError(result.error),
            });
          }
        }
      })().catch(recordFailure),
      (async () => {
        const text = await new Response(forText).text();
        done = /(^|\n)data: \[DONE\]\s*$/.test(text);
      })().catch(recordFailure),
    ]);
    return new Response(forSdk, {
      status: answer.status,
      statusText: answer.statusText,
      headers: answer.headers,
    });
  };

  const transport = new DefaultChatTransport({
    api,
    headers: { 'X-CSRF-Token': options.csrf, Cookie: options.cookie },
    fetch: auditingFetch,
    prepareSendMessagesRequest: ({ messages, trigger, body, headers }) =>
      trigger === 'regenerate-message'
        ? {
            api: api.replace(/\/messages$/, '/regenerate'),
            body: { message_id: body.message_id },
            headers,
          }
        : { body: hearthBody(messages), headers },
    prepareReconnectToStreamRequest: ({ headers }) => ({ api: `${chatPath}/stream`, headers }),
  });

  let chatError;
  const chat = new TurnChat({
    id: options['chat-id'],
    transport,
    onError: (error) => {
      chatError = error;
    },
  });

  const timeoutMs = Number(options['timeout-ms']);
  const timer = setTimeout(() => {
    errors.push({
      source: 'timeout',
      error: { name: 'Timeout', message: `the turn did not end within ${timeoutMs} ms` },
    });
    chat.stop();
  }, timeoutMs);
  let first;
  try {
    if (options.resume) {
      await chat.resumeStream();
    } else {
      await chat.sendMessage({ text: options.content });
    }
    await audit;
    if (options.regenerate) {
      first = chunks.splice(0);
      const question = chat.lastMessage.parts.find((part) => part.type === 'data-user-message');
      await chat.regenerate({ body: { message_id: question?.data.id } });
      await audit;
    }
  } finally {
    clearTimeout(timer);
  }

  const failure = chatError ?? chat.error;
  if (failure !== undefined) {
    errors.push({ source: 'chat', error: describeError(failure) });
  }
  if (chat.status !== 'ready') {
    errors.push({
      source: 'chat',
      error: { name: 'ChatStatus', message: `chat ended as ${chat.status}` },
    });
  }

  const messages = chat.messages;
  const message = messages.findLast((m) => m.role === 'assistant') ?? null;
  const { status } = chat;
  const report = { response, chunks, done, message, messages, status, errors, requests };
  if (first !== undefined) report.first = first;
  process.stdout.write(`${JSON.stringify(report)}\n`);
  process.exitCode = errors.length > 0 ? 1 : 0;
}

main().catch((error) => {
  const errors = [{ source: 'script', error: describeError(error) }];
  process.stdout.write(`${JSON.stringify({ chunks: [], message: null, errors })}\n`);
  process.exitCode = 1;
});

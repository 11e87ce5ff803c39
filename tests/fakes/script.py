"""What a fake provider answers: scripted replies, failures, cut and hanging streams.

These are provider-neutral on purpose: one `Reply` is rendered as Anthropic Messages SSE events by
`FakeAnthropic` and as Chat Completions chunks by `FakeOpenAI`, so a test can script the same turn
for every provider. Timing lives on the reply (`first_token_delay`, `token_interval`) because
latency is what benchmarks measure and what cancellation tests race against; `schedule()` builds
the benchmark shape "first token after X ms, then N tokens every Y ms".
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, TypeAlias

__all__ = [
    "Cut",
    "Fail",
    "Hang",
    "Reply",
    "Scripted",
    "ToolCall",
    "Usage",
    "parse_schedule",
    "schedule",
]


@dataclass
class ToolCall:
    """A tool call the model makes. `id=None` gets a provider-style id.

    Anthropic ids look like `toolu_01A09q90qw90lq917835lq9`, OpenAI's like `call_abc123`, and
    Moonshot's like `functions.list_files:0` (the name plus a running index of the tool calls in
    the conversation).
    """

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    id: str | None = None


@dataclass
class Usage:
    """Token counts reported for a reply, provider-neutral.

    `input_tokens` is the whole prompt, cached tokens included (what pydantic-ai reports as
    `input_tokens` for every provider). On the Anthropic wire that becomes
    `input_tokens = input - cache_read - cache_write` plus `cache_read_input_tokens` and
    `cache_creation_input_tokens`; on the OpenAI wire `prompt_tokens = input` with
    `prompt_tokens_details.cached_tokens = cache_read`.
    """

    input_tokens: int
    output_tokens: int
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0

    def __post_init__(self) -> None:
        if self.cache_read_tokens + self.cache_write_tokens > self.input_tokens:
            raise ValueError("cached tokens are part of input_tokens, so cannot exceed it")

    @property
    def uncached_input_tokens(self) -> int:
        return self.input_tokens - self.cache_read_tokens - self.cache_write_tokens


@dataclass
class Reply:
    """A successful reply: optional reasoning, then text, then tool calls.

    Text, reasoning and tool-call arguments are streamed in deltas of `chunk_chars` characters.
    The first delta waits `first_token_delay` seconds after the stream opens (headers and the
    opening events go out at once), each later one `token_interval` seconds. `usage=None`
    estimates the usage from the request size and the number of deltas. `stop_reason` overrides
    the natural one (`end_turn`/`tool_use` on Anthropic, `stop`/`tool_calls` on OpenAI), e.g.
    `"max_tokens"` or `"length"`. `model` overrides the model name echoed from the request.
    `signature` is the Anthropic thinking-block signature (one is made up when `None`).
    `hold`, when given, keeps the first delta (a whole JSON body) back until the test sets it:
    a reply that stays under way for exactly as long as the test needs.
    """

    text: str = ""
    reasoning: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    usage: Usage | None = None
    first_token_delay: float = 0.0
    token_interval: float = 0.0
    chunk_chars: int = 8
    stop_reason: str | None = None
    model: str | None = None
    signature: str | None = None
    hold: asyncio.Event | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.chunk_chars < 1:
            raise ValueError("chunk_chars must be at least 1")


@dataclass
class Fail:
    """An error answer in the provider's own JSON error shape.

    `error_type` (and OpenAI's `code`) default to what the provider sends for `status`, e.g.
    Anthropic `rate_limit_error` for 429 and `overloaded_error` for 529. `retry_after` (seconds)
    is sent as `retry-after` (whole seconds, rounded up) and, when fractional, also as
    `retry-after-ms`, which the official SDKs read first. With `in_stream=True` the stream opens
    with a 200 and the error arrives as an in-stream error event after the opening events, the
    way an overloaded Anthropic stream ends.
    """

    status: int
    message: str = "scripted failure"
    retry_after: float | None = None
    error_type: str | None = None
    code: str | None = None
    in_stream: bool = False


@dataclass
class Cut:
    """Open the stream, send the first `after_events` events of `reply`, then drop the connection.

    No terminal events (`message_stop`, `data: [DONE]`) and no final empty chunk are sent, so the
    client sees a broken transfer, as when a provider's connection dies mid-stream.
    """

    after_events: int
    reply: Reply = field(
        default_factory=lambda: Reply(text="This reply is cut off long before it ends.")
    )


@dataclass
class Hang:
    """Open the stream, send the first `after_events` events, then wait for the client to leave.

    `after_events=None` sends just the opening events (Anthropic `message_start` and `ping`, the
    OpenAI role chunk). The server records when the client disconnected, so a test can prove that
    cancelling a chat cancels the upstream request. A non-streaming request gets no response at
    all.
    """

    after_events: int | None = None
    reply: Reply = field(default_factory=lambda: Reply(text="This reply never arrives."))


Scripted: TypeAlias = Reply | Fail | Cut | Hang


def schedule(
    first_ms: float, tokens: int, interval_ms: float, token: str = "tok ", text: str | None = None
) -> Reply:
    """A benchmark reply: the first token after `first_ms`, the rest `interval_ms` apart.

    `tokens` deltas in all, each carrying one `token`; usage reports `tokens` output tokens.
    """
    if tokens < 1:
        raise ValueError("a schedule needs at least one token")
    return Reply(
        text=text if text is not None else token * tokens,
        first_token_delay=first_ms / 1000,
        token_interval=interval_ms / 1000,
        chunk_chars=len(token),
        usage=Usage(input_tokens=100, output_tokens=tokens),
    )


def parse_schedule(spec: str) -> Reply:
    """`"first_ms=200,tokens=50,interval_ms=20"` (and optionally `token=...`) as a `schedule()`."""
    values: dict[str, str] = {}
    for part in spec.split(","):
        key, sep, value = part.partition("=")
        if not sep:
            raise ValueError(f"schedule part {part!r} is not key=value")
        values[key.strip()] = value
    unknown = set(values) - {"first_ms", "tokens", "interval_ms", "token"}
    if unknown:
        raise ValueError(f"unknown schedule keys: {sorted(unknown)}")
    return schedule(
        first_ms=float(values.get("first_ms", 0)),
        tokens=int(values.get("tokens", 1)),
        interval_ms=float(values.get("interval_ms", 0)),
        token=values.get("token", "tok "),
    )

"""What an MCP server asks while a call runs, routed to the call it belongs to.

An MCP session is shared by every chat of the process, and the requests a server sends back
(`elicitation/create`, `sampling/createMessage`) do not say on the wire which of its calls they
belong to: on stdio and on stateful HTTP they arrive on the session, which answers them in a task
of its own. So each call registers itself on its server while it runs (`InFlight`), and a
request is routed:

- to the call whose task made it, when the protocol lets the SDK answer it inside the call (a
  2026-07-28 server's input-required results: the call's context is current there);
- else to the one call of that server in flight;
- else nowhere: with no call, or with several at once that the request cannot tell apart, it is
  refused with an MCP error rather than guessed — one user's form must never reach another.

While the user or the model answers, the call's own timeout stands still (the server is waiting
for hearth, not working), and runs again in full once the answer has gone back; the user has the
call's `timeout_seconds` to answer a form, after which it is cancelled.

The handlers are FastMCP-shaped, since that is what pydantic-ai's `MCPToolset` installs on the
session; the sampling messages are mapped to pydantic-ai's own types here (text and images; the
other blocks as their text), because pydantic-ai's own mapping is private to its MCP module.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import contextvars
import logging
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import mcp_types
from fastmcp.client.elicitation import ElicitationHandler, ElicitResult
from fastmcp.client.sampling import SamplingHandler
from pydantic_ai.messages import (
    BinaryContent,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    UserContent,
    UserPromptPart,
)

from app.tools.asks import SamplingRequest, ServerAsks

log = logging.getLogger("hearth.mcp")


class Refused(Exception):
    """A server's request hearth will not answer; the message goes back to the server."""


@dataclass(eq=False)
class InFlight:
    """One call of a server while it runs: who answers for it, and its moving deadline."""

    asks: ServerAsks | None
    deadline: asyncio.Timeout
    timeout: float
    loop: asyncio.AbstractEventLoop = field(default_factory=asyncio.get_running_loop)
    user_id: uuid.UUID | None = None
    """Whose call it is."""
    waiting: int = 0
    """How many of its server's requests are being answered now (the deadline stands still)."""

    @contextlib.asynccontextmanager
    async def paused(self) -> AsyncIterator[None]:
        """The call's timeout stands still while the block runs, then starts again in full."""
        self.waiting += 1
        with contextlib.suppress(RuntimeError):  # the call has already ended
            self.deadline.reschedule(None)
        try:
            yield
        finally:
            self.waiting -= 1
            if not self.waiting:
                with contextlib.suppress(RuntimeError):
                    self.deadline.reschedule(self.loop.time() + self.timeout)


current_call: contextvars.ContextVar[InFlight | None] = contextvars.ContextVar(
    "hearth_mcp_call", default=None
)
"""The call whose task is running, set by `McpGroups.call` around the server's call."""


def asker(server: str, inflight: list[InFlight], what: str) -> InFlight:
    """The call a server's request belongs to, or `Refused` with why there is none."""
    flight = current_call.get()
    if flight is not None and flight in inflight:
        return flight
    if not inflight:
        raise Refused(f"hearth has no call of MCP server {server!r} running to {what} for.")
    if len(inflight) > 1:
        raise Refused(
            f"MCP server {server!r} has {len(inflight)} calls running and its request does "
            f"not say which one it is for; hearth does not {what} when it cannot tell."
        )
    return inflight[0]


def elicitation_handler(server: str, inflight: list[InFlight]) -> ElicitationHandler[Any, Any]:
    """Answers `elicitation/create` by putting the form to the user of the call (form mode)."""

    async def handle(
        message: str, response_type: Any, params: mcp_types.ElicitRequestParams, context: Any
    ) -> ElicitResult[dict[str, Any]]:
        if not isinstance(params, mcp_types.ElicitRequestFormParams):
            return ElicitResult(action="decline")  # URL mode: hearth has no place to send it
        flight = asker(server, inflight, "ask the user")
        if flight.asks is None:
            return ElicitResult(action="decline")
        schema = dict(params.requested_schema)
        async with flight.paused():
            answer = await flight.asks.elicit(message, schema, timeout=flight.timeout)
        return ElicitResult(action=answer.action, content=answer.content)

    return handle


def sampling_handler(server: str, inflight: list[InFlight]) -> SamplingHandler[Any, Any]:
    """Answers `sampling/createMessage` with the chat's model (installed only where allowed)."""

    async def handle(
        messages: list[mcp_types.SamplingMessage],
        params: mcp_types.CreateMessageRequestParams,
        context: Any,
    ) -> mcp_types.CreateMessageResult:
        flight = asker(server, inflight, "sample")
        if flight.asks is None:
            raise Refused(f"MCP server {server!r} may not sample outside a chat's turn.")
        request = SamplingRequest(
            messages=sampling_messages(messages),
            system_prompt=params.system_prompt,
            max_tokens=params.max_tokens,
            temperature=params.temperature,
            stop_sequences=params.stop_sequences,
        )
        async with flight.paused():
            sampled = await flight.asks.sample(request)
        log.info("MCP server %r sampled %s", server, sampled.model)
        return mcp_types.CreateMessageResult(
            role="assistant",
            content=mcp_types.TextContent(type="text", text=sampled.text),
            model=sampled.model,
            stop_reason=sampled.stop_reason,
        )

    return handle


def sampling_messages(messages: list[mcp_types.SamplingMessage]) -> list[ModelMessage]:
    """A server's sampling messages as a pydantic-ai history: user turns are requests, assistant
    turns responses; images go as images, every other block as its text."""
    history: list[ModelMessage] = []
    for message in messages:
        blocks = message.content if isinstance(message.content, list) else [message.content]
        if message.role == "assistant":
            text = "\n".join(_text_of(block) for block in blocks)
            history.append(ModelResponse(parts=[TextPart(text)]))
            continue
        content: list[UserContent] = []
        for block in blocks:
            if isinstance(block, mcp_types.ImageContent):
                try:
                    data = base64.b64decode(block.data, validate=True)
                except ValueError:
                    content.append("[an image that could not be decoded]")
                    continue
                content.append(BinaryContent(data=data, media_type=block.mime_type))
            else:
                content.append(_text_of(block))
        history.append(ModelRequest(parts=[UserPromptPart(content)]))
    return history


def _text_of(block: Any) -> str:
    if isinstance(block, mcp_types.TextContent):
        return block.text
    if isinstance(block, mcp_types.AudioContent):
        return f"[audio ({block.mime_type}) that this client does not pass to the model]"
    kind = getattr(block, "type", "content")
    return f"[{kind} content that this client does not pass to the model]"

"""Request-time compaction: what earlier questions left behind, made small in the outgoing
request only.

A tool return of `MIN_CHARS` characters or more from an earlier question becomes a one-line
receipt (`[read_file] docs/a.md — 12,345 characters, from an earlier question, not shown`);
smaller returns and every `activate_tools` return stay as they are (they are small, and in
`anthropic_tool_reference` they carry the tool references). Each call stays paired with its
return, so every provider accepts the history; the model knows what it had and can fetch it again.

"Earlier" is decided by the question's identity, never by the shape of the messages: the
question in progress starts at the stored user message whose id the turn was started with
(`MESSAGE_ID_KEY` on its request), which a turn resumed after approvals keeps, so a question's
own returns are never compacted while it is still being answered. Earlier questions' media are
already notes (the media router inlines the current question's only).

It is a capability (`prepare_model_request`) that builds new lists and parts: nothing compacted
reaches the stored rows or the run's own history, and leaving the capability out sends the
history untouched. Only the previous question's messages change when a new question starts,
which is what keeps the provider caches warm (WIRE.md §2c).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from pydantic_ai import RunContext
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models import ModelRequestContext

from app.llm.dtl import MESSAGE_ID_KEY
from app.tools.activation import ACTIVATE_TOOLS

MIN_CHARS = 1000
SUBJECT_KEYS = ("path", "query", "url", "name", "id")


def question_start(messages: list[ModelMessage], question_id: int) -> int | None:
    """The index of the request that starts the question in progress, if it is there."""
    for index, message in enumerate(messages):
        if (
            isinstance(message, ModelRequest)
            and (message.metadata or {}).get(MESSAGE_ID_KEY) == question_id
        ):
            return index
    return None


def receipt(part: ToolReturnPart, call: ToolCallPart | None, size: int) -> str:
    subject = ""
    if call is not None:
        arguments = call.args_as_dict()
        value = next(
            (arguments[k] for k in SUBJECT_KEYS if isinstance(arguments.get(k), str)), None
        )
        if value is None:
            value = next((v for v in arguments.values() if isinstance(v, str)), None)
        if value:
            subject = f" {' '.join(value.split())[:120]}"
    return f"[{part.tool_name}]{subject} — {size:,} characters, from an earlier question, not shown"


def compact_earlier_returns(
    messages: list[ModelMessage], question_id: int, min_chars: int = MIN_CHARS
) -> list[ModelMessage]:
    """`messages` with earlier questions' large tool returns as receipts (new objects)."""
    start = question_start(messages, question_id)
    if not start:
        return messages
    calls: dict[str, ToolCallPart] = {}
    out: list[ModelMessage] = []
    for index, message in enumerate(messages):
        if index < start and isinstance(message, ModelResponse):
            calls.update((p.tool_call_id, p) for p in message.parts if isinstance(p, ToolCallPart))
        if index >= start or not isinstance(message, ModelRequest):
            out.append(message)
            continue
        parts = list(message.parts)
        changed = False
        for i, part in enumerate(parts):
            if not isinstance(part, ToolReturnPart) or part.tool_name == ACTIVATE_TOOLS:
                continue
            text = part.model_response_str()
            if len(text) < min_chars:
                continue
            parts[i] = replace(part, content=receipt(part, calls.get(part.tool_call_id), len(text)))
            changed = True
        out.append(replace(message, parts=parts) if changed else message)
    return out


class ToolReturnCompaction(AbstractCapability[Any]):
    def __init__(self, question_id: int, min_chars: int = MIN_CHARS) -> None:
        self.question_id = question_id
        self.min_chars = min_chars

    async def prepare_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        messages = compact_earlier_returns(
            request_context.messages, self.question_id, self.min_chars
        )
        if messages is request_context.messages:
            return request_context
        return replace(request_context, messages=messages)

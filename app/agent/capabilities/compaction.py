"""Request-time compaction: what earlier questions left behind, made small in the outgoing
request only.

A tool return of `MIN_CHARS` characters or more from an earlier question becomes a one-line
receipt (`[read_file] docs/a.md — 12,345 characters, from an earlier question, not shown`);
smaller returns and every `activate_tools` return stay as they are (they are small, and in
`anthropic_tool_reference` they carry the tool references). Each call stays paired with its
return, so every provider accepts the history; the model knows what it had and can fetch it again.

Evidence is the exception that keeps more: of the earlier questions' `knowledge_search` returns,
the newest carries the capsule — every passage cited in earlier questions, in full, grouped by
the latest question that cited it (`app.knowledge.evidence.capsule`) — and every other becomes a
receipt, whatever its size. One capsule exists by construction: it replaces exactly one return.
When a new question moves the capsule, the return that held it becomes a receipt: the one
change a new question makes outside the previous question's messages.

"Earlier" is decided by the question's identity, never by the shape of the messages: the
question in progress starts at the stored user message whose id the turn was started with
(`MESSAGE_ID_KEY` on its request), which a turn resumed after approvals keeps, so a question's
own returns are never compacted while it is still being answered. Earlier questions' media are
already notes (the media router inlines the current question's only).

It is a capability (`prepare_model_request`) that builds new lists and parts: nothing compacted
reaches the stored rows or the run's own history, and leaving the capability out sends the
history untouched. Only the previous question's messages change when a new question starts,
which is what keeps the provider caches warm (docs/wire.md §2c).
"""

from __future__ import annotations

import operator
from dataclasses import replace
from typing import Any, TypeVar

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

from app.knowledge.evidence import KNOWLEDGE_SEARCH
from app.llm.dtl import MESSAGE_ID_KEY
from app.tools.activation import ACTIVATE_TOOLS
from app.tools.deps import TurnDeps

_T = TypeVar("_T")

MIN_CHARS = 1000
SUBJECT_KEYS = ("path", "query", "url", "name", "id")


def question_start(messages: list[ModelMessage], question_id: int) -> int | None:
    """The index of the request that starts the question in progress, if it is there."""
    for index in range(len(messages) - 1, -1, -1):  # it is near the end
        message = messages[index]
        if type(message) is ModelRequest and (message.metadata or {}).get(MESSAGE_ID_KEY) == (
            question_id
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


def _with(original: _T, **changes: Any) -> _T:
    """A copy of a pydantic-ai message or part with some fields changed.

    `dataclasses.replace` runs `__init__` (and a request's part checks) again, several times the
    cost of the copy itself, once per receipt on every request; the copy keeps the original's
    validated fields and its type, and the changes are values of the same kind.
    """
    copy = object.__new__(type(original))
    copy.__dict__.update(original.__dict__)
    copy.__dict__.update(changes)
    return copy


def _last_search(messages: list[ModelMessage], end: int) -> tuple[int, int] | None:
    """(message index, part index) of the newest knowledge_search return before `end`."""
    for index in range(end - 1, -1, -1):
        message = messages[index]
        if type(message) is ModelRequest:
            for i in range(len(message.parts) - 1, -1, -1):
                part = message.parts[i]
                if type(part) is ToolReturnPart and part.tool_name == KNOWLEDGE_SEARCH:
                    return index, i
    return None


def compact_earlier_returns(
    messages: list[ModelMessage],
    question_id: int,
    min_chars: int = MIN_CHARS,
    capsule: str | None = None,
) -> list[ModelMessage]:
    """`messages` with earlier questions' large tool returns as receipts (new objects), and
    their evidence returns as one capsule (the newest) and receipts (every other)."""
    start = question_start(messages, question_id)
    if not start:
        return messages
    out = list(messages)
    holder = _last_search(out, start) if capsule is not None else None
    calls: dict[str, ToolCallPart] = {}
    for index in range(start):
        message = out[index]
        if type(message) is ModelResponse:
            calls = {p.tool_call_id: p for p in message.parts if type(p) is ToolCallPart}
            continue
        parts: list[Any] | None = None
        for i, part in enumerate(message.parts):
            if type(part) is not ToolReturnPart or part.tool_name == ACTIVATE_TOOLS:
                continue
            evidence = holder is not None and part.tool_name == KNOWLEDGE_SEARCH
            content = part.content
            size = len(content) if type(content) is str else len(part.model_response_str())
            if size < min_chars and not evidence:
                continue
            if parts is None:
                parts = list(message.parts)
            if evidence and holder == (index, i):
                text = capsule
            else:
                text = receipt(part, calls.get(part.tool_call_id), size)
            parts[i] = _with(part, content=text)
        if parts is not None:
            out[index] = _with(message, parts=parts)
    return out


class ToolReturnCompaction(AbstractCapability[TurnDeps]):
    """One per turn. The earlier questions are the same objects in every request of a turn, so
    their compacted form is made once and reused; the question in progress is passed as is."""

    def __init__(
        self, question_id: int, capsule: str | None = None, min_chars: int = MIN_CHARS
    ) -> None:
        self.question_id = question_id
        self.capsule = capsule
        """Earlier questions' cited evidence (`knowledge.evidence.capsule`), if they searched."""
        self.min_chars = min_chars
        self._earlier: list[ModelMessage] = []
        self._compacted: list[ModelMessage] = []

    async def prepare_model_request(
        self, ctx: RunContext[TurnDeps], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        messages = request_context.messages
        done = len(self._earlier)
        if done and len(messages) > done and all(map(operator.is_, messages, self._earlier)):
            compacted = [*self._compacted, *messages[done:]]
        else:
            compacted = compact_earlier_returns(
                messages, self.question_id, self.min_chars, self.capsule
            )
            start = question_start(messages, self.question_id) or 0
            self._earlier, self._compacted = messages[:start], compacted[:start]
        if compacted is messages:
            return request_context
        return replace(request_context, messages=compacted)

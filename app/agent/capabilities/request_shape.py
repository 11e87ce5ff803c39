"""The last touches on every outgoing request, applied to a copy: the stored rows and the run's
own history never see them.

- The dynamic tail. Date and time and budget notices (`app.agent.capabilities.budget`) would
  break every provider cache if they sat in the system prompt, so they go last (docs/wire.md §2c):
  a marked part at the very end of the request, which each model class renders in its
  provider's place for it (a final `system` message on OpenAI-compatible APIs, the last text
  block of the last user message on Anthropic).
- No library announcements of new tools. When a group's tools join the array mid-run,
  pydantic-ai records a `ToolAvailabilityDeltaPart` and would announce it in a system message
  of its own; in hearth an activation is rendered from its anchor only (docs/wire.md §2), and a
  message that later turns could not rebuild would break the cached prefix, so they are dropped.

It is a capability hook (`prepare_model_request`: per attempt, the serving model known), and it
builds new lists and parts, which pydantic-ai keeps out of the run's history.
"""

from __future__ import annotations

from dataclasses import replace

from pydantic_ai import RunContext
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import ModelMessage, ModelRequest, ToolAvailabilityDeltaPart
from pydantic_ai.models import ModelRequestContext

from app.agent.capabilities.budget import budget_notice
from app.clock import Clock
from app.llm.dtl import with_tail
from app.tools.deps import TurnDeps


class RequestShape(AbstractCapability[TurnDeps]):
    def __init__(self, clock: Clock, max_rounds: int | None = None) -> None:
        self.clock = clock
        self.max_rounds = max_rounds

    def tail(self, ctx: RunContext[TurnDeps] | None = None) -> str:
        now = self.clock.now()
        lines = [f"[hearth/context] Current date and time: {now:%A %d %B %Y, %H:%M} UTC."]
        if ctx is not None and self.max_rounds is not None:
            notice = budget_notice(ctx.deps.evidence, ctx.usage.requests + 1, self.max_rounds)
            if notice:
                lines.append(notice)
        return "\n".join(lines)

    async def prepare_model_request(
        self, ctx: RunContext[TurnDeps], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        messages = with_tail(without_tool_deltas(request_context.messages), self.tail(ctx))
        return replace(request_context, messages=messages)


def without_tool_deltas(messages: list[ModelMessage]) -> list[ModelMessage]:
    out: list[ModelMessage] = []
    for message in messages:
        if isinstance(message, ModelRequest) and any(
            isinstance(p, ToolAvailabilityDeltaPart) for p in message.parts
        ):
            parts = [p for p in message.parts if not isinstance(p, ToolAvailabilityDeltaPart)]
            if not parts:
                continue
            message = replace(message, parts=parts)
        out.append(message)
    return out

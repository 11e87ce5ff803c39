"""A turn's capabilities, handed to pydantic-ai as one.

Each capability keeps its own module and state (the recorder, the request log, the quota guard,
the request shapers), but the run sees one capability that calls their hooks in the order a
list of them would. The reason is what pydantic-ai's combination costs per capability, whether
or not it implements the hook at hand: a copy of the run context for every capability at every
hook (3.1 µs each on the benchmark machine; a turn of two rounds made 242 of them with the six
capabilities listed, 104 with this one), and, once any capability wraps the event stream, a
pass-through generator per capability that every streamed event goes through (8 generators an
event, now 5). With one capability the copies are one per hook, and of hearth's own only the two
wrappers that look at the stream (request log, recorder) stand between it and the run, and the
turn's shortcut after them, which takes most text deltas off the stream (`Turn.shortcut`).

Only the hooks the parts implement are forwarded; `tests/agent/test_turn_hooks.py` fails when a
part gains a hook this class does not pass on.

The run gets it through the agent (`TurnSlot`, the turn agent's one capability), not as a
capability of the run: pydantic-ai resolves a run's own capabilities beside the agent's in a
task group of their own. A run of a `FunctionModel` to its first text took 2.43 ms with a
capability given to the run, 2.30 ms with it given through the slot and 2.14 ms with none
(medians of 300, the benchmark machine).
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

from pydantic_ai import RunContext
from pydantic_ai._utils import aclose_if_supported
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import ModelResponse, ToolCallPart
from pydantic_ai.models import ModelRequestContext
from pydantic_ai.tools import ToolDefinition

from app.tools.deps import TurnDeps

Part = AbstractCapability[TurnDeps]


async def _offered(stream: AsyncIterable[Any], take: Callable[[Any], bool]) -> AsyncIterator[Any]:
    """The events of `stream` that `take` does not take."""
    try:
        async for event in stream:
            if not take(event):
                yield event
    finally:
        await aclose_if_supported(stream)


class TurnSlot(AbstractCapability[TurnDeps]):
    """The turn agent's place for each run's `TurnHooks`, which the run's deps carry
    (`TurnDeps.capability`); a run without them gets the slot, which does nothing."""

    async def for_run(self, ctx: RunContext[TurnDeps]) -> AbstractCapability[TurnDeps]:
        return ctx.deps.capability or self


class TurnHooks(AbstractCapability[TurnDeps]):
    """The quota guard (outermost), the recorder, the request log, then the preparers in order:
    `app.agent.quotas.QuotaGuard`, `Recorder`, `RequestLog`, and the capabilities that only
    `prepare_model_request` (tool-return compaction, media, the request's shape)."""

    def __init__(
        self,
        *,
        recorder: Part,
        request_log: Part,
        preparers: Sequence[Part] = (),
        guard: Part | None = None,
        shortcut: Callable[[Any], bool] | None = None,
    ) -> None:
        """`shortcut`: offered each event after the recorder has seen it; an event it takes
        (True) goes no further down the run's stream (`app.agent.turn.Turn.shortcut` says why)."""
        self.guard = guard
        self.shortcut = shortcut
        self.recorder = recorder
        self.request_log = request_log
        self.preparers = tuple(preparers)

    def wrap_run_event_stream(
        self, ctx: RunContext[TurnDeps], *, stream: AsyncIterable[Any]
    ) -> AsyncIterable[Any]:
        """The request log sees each event first, then the recorder, as in a list of them, then
        the shortcut; no other generator of this class's own sits between them and the run."""
        logged = self.request_log.wrap_run_event_stream(ctx, stream=stream)
        recorded = self.recorder.wrap_run_event_stream(ctx, stream=logged)
        if self.shortcut is None:
            return recorded
        return _offered(recorded, self.shortcut)

    async def wrap_model_request(
        self,
        ctx: RunContext[TurnDeps],
        *,
        request_context: ModelRequestContext,
        handler: Callable[[ModelRequestContext], Awaitable[ModelResponse]],
    ) -> ModelResponse:
        recorder, request_log = self.recorder, self.request_log

        async def logged(context: ModelRequestContext) -> ModelResponse:
            return await request_log.wrap_model_request(
                ctx, request_context=context, handler=handler
            )

        async def recorded(context: ModelRequestContext) -> ModelResponse:
            return await recorder.wrap_model_request(ctx, request_context=context, handler=logged)

        if self.guard is None:
            return await recorded(request_context)
        return await self.guard.wrap_model_request(
            ctx, request_context=request_context, handler=recorded
        )

    async def prepare_model_request(
        self, ctx: RunContext[TurnDeps], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        for preparer in self.preparers:
            request_context = await preparer.prepare_model_request(ctx, request_context)
        return request_context

    async def before_tool_validate(
        self,
        ctx: RunContext[TurnDeps],
        *,
        call: ToolCallPart,
        tool_def: ToolDefinition,
        args: str | dict[str, Any],
    ) -> str | dict[str, Any]:
        result: str | dict[str, Any] = await self.recorder.before_tool_validate(
            ctx, call=call, tool_def=tool_def, args=args
        )
        return result

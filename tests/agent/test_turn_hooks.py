"""`TurnHooks` is the turn's capabilities as one: the same hooks, in the same order, as the list."""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator
from typing import Any

import pytest
from pydantic_ai import Agent, AgentRunResultEvent
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import ModelMessage, ModelResponse
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel
from pydantic_ai.models.test import TestModel

from app.agent.capabilities.compaction import ToolReturnCompaction
from app.agent.capabilities.media import MediaRouter
from app.agent.capabilities.recorder import Recorder
from app.agent.capabilities.request_log import RequestLog
from app.agent.capabilities.request_shape import RequestShape
from app.agent.capabilities.turn_hooks import TurnHooks
from app.agent.quotas import QuotaGuard

HOOKS = frozenset(
    name
    for name, value in vars(AbstractCapability).items()
    if callable(value)
    and (
        name.startswith(("wrap_", "before_", "after_", "on_", "prepare_"))
        or name in {"for_run", "get_toolset", "get_instructions", "get_model_settings"}
    )
)


def overridden(capability: type[AbstractCapability[Any]]) -> set[str]:
    """The hooks `capability` implements itself rather than inherits as no-ops."""
    return {
        name for name in HOOKS if getattr(capability, name) is not vars(AbstractCapability)[name]
    }


@pytest.mark.parametrize(
    "part",
    [Recorder, RequestLog, QuotaGuard, ToolReturnCompaction, MediaRouter, RequestShape],
    ids=lambda part: part.__name__,
)
def test_every_hook_a_part_implements_is_passed_on(part: type[AbstractCapability[Any]]) -> None:
    implemented = overridden(part)
    assert implemented, f"{part.__name__} implements no hook"
    missing = implemented - overridden(TurnHooks)
    assert not missing, f"TurnHooks does not pass on {missing}"


class Traced(AbstractCapability[Any]):
    """Notes each hook it sees, with its name, in a shared list; the subclasses below have the
    hooks of the part they stand for."""

    def __init__(self, name: str, log: list[str]) -> None:
        self.name = name
        self.log = log


class Around(Traced):
    async def wrap_model_request(
        self, ctx: Any, *, request_context: Any, handler: Any
    ) -> ModelResponse:
        self.log.append(f"{self.name} request in")
        response: ModelResponse = await handler(request_context)
        self.log.append(f"{self.name} request out")
        return response


class Watching(Around):
    async def wrap_run_event_stream(
        self, ctx: Any, *, stream: AsyncIterable[Any]
    ) -> AsyncIterable[Any]:
        async for event in stream:
            self.log.append(f"{self.name} event {type(event).__name__}")
            yield event


class Recording(Watching):
    async def before_tool_validate(self, ctx: Any, *, call: Any, tool_def: Any, args: Any) -> Any:
        self.log.append(f"{self.name} validate {call.tool_name}")
        return args


class Prepare(Traced):
    async def prepare_model_request(self, ctx: Any, request_context: Any) -> Any:
        self.log.append(f"{self.name} prepare")
        return request_context


async def answer(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
    """A tool call first, then text once the tool's return is in."""
    if len(messages) == 1:
        yield {0: DeltaToolCall(name="lookup", json_args='{"term": "x"}', tool_call_id="c1")}
    else:
        yield "found "
        yield "it"


def agent() -> Agent[None, str]:
    made: Agent[None, str] = Agent(FunctionModel(stream_function=answer))

    @made.tool_plain
    def lookup(term: str) -> str:
        return f"about {term}"

    return made


async def traced(use_hooks: bool) -> tuple[list[str], str]:
    log: list[str] = []
    guard, recorder, request_log = (
        Around("guard", log),
        Recording("recorder", log),
        Watching("log", log),
    )
    first, second = Prepare("compaction", log), Prepare("shape", log)
    capabilities: list[AbstractCapability[Any]] = (
        [
            TurnHooks(
                guard=guard,
                recorder=recorder,
                request_log=request_log,
                preparers=[first, second],
            )
        ]
        if use_hooks
        else [guard, recorder, request_log, first, second]
    )
    async with agent().run_stream_events("look it up", capabilities=capabilities) as events:
        output = ""
        async for event in events:
            if isinstance(event, AgentRunResultEvent):
                output = event.result.output
    return log, output


async def test_hooks_run_in_the_order_of_the_list_they_replace() -> None:
    as_list, list_output = await traced(use_hooks=False)
    as_one, one_output = await traced(use_hooks=True)
    assert one_output == list_output == "found it"
    assert as_one == as_list
    # What the comparison rests on: every hook ran, the guard outside the recorder outside the
    # request log, the preparers in their order, the request log seeing each event first.
    assert as_one[:5] == [
        "guard request in",
        "recorder request in",
        "log request in",
        "compaction prepare",
        "shape prepare",
    ]
    assert "recorder validate lookup" in as_one
    first_event = next(i for i, line in enumerate(as_one) if " event " in line)
    assert as_one[first_event].startswith("log event")
    assert as_one[first_event + 1] == as_one[first_event].replace("log", "recorder", 1)


async def test_a_run_without_a_guard_has_no_guard() -> None:
    log: list[str] = []
    hooks = TurnHooks(recorder=Recording("recorder", log), request_log=Watching("log", log))
    result = await Agent(TestModel(custom_output_text="ok")).run("hi", capabilities=[hooks])
    assert result.output == "ok"
    assert log[:2] == ["recorder request in", "log request in"]
    assert not any(line.startswith("guard") for line in log)

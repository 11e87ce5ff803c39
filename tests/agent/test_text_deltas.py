"""The turn's short paths for text deltas: the stream they write is the transform's, byte for
byte, for plain answers, parts that follow each other, deltas the paths leave to the transform, a
run that fails in the middle of a part (which the transform closes from the deltas it kept), and
deltas taken in the run's own task (`Turn.shortcut`) beside events still on their way."""

from __future__ import annotations

import asyncio
import itertools
import re
import uuid
from collections.abc import AsyncIterator
from typing import Any, cast

import orjson
import pytest
from pydantic_ai import Agent
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import (
    ModelMessage,
    PartDeltaEvent,
    PartEndEvent,
    PartStartEvent,
    TextPart,
    TextPartDelta,
    ThinkingPart,
    ThinkingPartDelta,
)
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel
from pydantic_ai.ui import _event_stream
from pydantic_ai.ui.vercel_ai.response_types import TextDeltaChunk
from pydantic_core import PydanticSerializationError

from app.agent.capabilities.turn_hooks import TurnHooks
from app.agent.live import TurnLog
from app.agent.stream import TurnEventStream
from app.agent.turn import Turn


class Failed(Exception):
    pass


def answer() -> list[Any]:
    return [
        PartStartEvent(index=0, part=ThinkingPart("Let me")),
        PartDeltaEvent(index=0, delta=ThinkingPartDelta(content_delta=" think")),
        PartEndEvent(index=0, part=ThinkingPart("Let me think")),
        PartStartEvent(index=1, part=TextPart("Hel")),
        PartDeltaEvent(index=1, delta=TextPartDelta("lo")),
        PartDeltaEvent(index=1, delta=TextPartDelta(' "wörld"\n')),
        PartDeltaEvent(index=1, delta=TextPartDelta("")),
        PartDeltaEvent(
            index=1, delta=TextPartDelta(" more", provider_name="p", provider_details={"k": 1})
        ),
        PartDeltaEvent(index=7, delta=TextPartDelta("elsewhere")),
        PartEndEvent(index=1, part=TextPart('Hello "wörld"\n more')),
        PartStartEvent(index=2, part=TextPart("Second")),
        PartDeltaEvent(index=2, delta=TextPartDelta(" part")),
    ]


class Counting(TurnEventStream):
    took = 0
    ended: list[str]

    def text_delta(self, event: object) -> Any:
        chunk = super().text_delta(event)
        self.took += chunk is not None
        return chunk

    async def handle_part_end(self, event: PartEndEvent) -> AsyncIterator[Any]:
        """Note each part as it ends: on an error, the one the transform rebuilt from the
        deltas it kept."""
        self.ended = [*getattr(self, "ended", []), str(getattr(event.part, "content", ""))]
        async for chunk in super().handle_part_end(event):
            yield chunk


async def written(
    events: list[Any], monkeypatch: pytest.MonkeyPatch, *, short: bool, fail: bool
) -> tuple[list[str], int]:
    """The turn's log after the run's `events` (then a failure, or the part's end) and the
    content of each part as it ended; and how many events the short path took."""
    counter = itertools.count()  # the same part ids in both runs
    monkeypatch.setattr(_event_stream, "uuid4", lambda: uuid.UUID(int=next(counter)))
    t = Turn(cast(Any, None), cast(Any, None), TurnLog(uuid.uuid4(), "owner"))
    stream = Counting(run_input=cast(Any, None), user_message_id=1, usage=dict)

    async def run() -> AsyncIterator[Any]:
        for event in events:
            yield event
        if fail:
            raise Failed("the provider went away")
        yield PartEndEvent(index=2, part=TextPart("Second part"))

    source = run()
    async for chunk in stream.transform_stream(t._text_deltas(source, stream) if short else source):
        t._emit(stream.encode_event(chunk), t._sent.take(chunk))
    return [*t.log.data, *stream.ended], stream.took


@pytest.mark.parametrize("fail", [False, True])
async def test_the_short_path_writes_what_the_transform_writes(
    fail: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    events = answer()
    through_transform, _ = await written(events, monkeypatch, short=False, fail=fail)
    through_short_path, took = await written(events, monkeypatch, short=True, fail=fail)
    assert through_short_path == through_transform
    assert took == 3  # "lo", ' "wörld"\n', " part"; the transform has the rest
    assert sum('"type":"text-delta"' in data for data in through_transform) == 7
    if fail:
        assert '"type":"text-end"' in through_transform[-8]
        assert '"type":"error"' in through_transform[-7]
    assert through_transform[-1] == "Second part"  # failed or not, the last part is whole


def test_a_delta_is_encoded_as_the_model_encodes_its_chunk() -> None:
    """Every character (each control character, quote and backslash, U+2028, the astral
    planes) and each part id: what `encode_text_delta` writes is what `TextDeltaChunk`
    serialises; a lone surrogate, which neither can write, fails as the model fails."""
    stream = TurnEventStream(run_input=cast(Any, None), user_message_id=1, usage=dict)
    everything = "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF)
    samples = [everything[i : i + 997] for i in range(0, len(everything), 997)]
    samples += ["", '"', "\\", "\u2028\u2029", "tok ", "😀" * 3]
    for part in range(3):
        stream.new_message_id()
        for delta in samples:
            expected = stream.encode_event(TextDeltaChunk(id=stream.message_id, delta=delta))
            assert stream.encode_text_delta(delta) == expected, (part, delta[:20])
        with pytest.raises(PydanticSerializationError):
            stream.encode_text_delta("\ud800 half a pair")


WORDS = [f" w{i}" for i in range(60)]
TIMESTAMP = re.compile(r'"timestamp":"[^"]+"')
"""The one thing two runs write differently: when each message was made."""


async def words(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
    """A tool call, then the answer: bursts of deltas with nothing between them (the first
    delta after a part's start meets that start still on its way), and deltas a moment apart."""
    if len(messages) == 1:
        yield {0: DeltaToolCall(name="lookup", json_args='{"term": "x"}', tool_call_id="c1")}
        return
    for index, word in enumerate(WORDS):
        if index % 20 >= 10:
            await asyncio.sleep(0.001)
        yield word


async def run_turn(monkeypatch: pytest.MonkeyPatch, *, shortcut: bool) -> tuple[list[str], int]:
    """The log of a real pydantic-ai run (its own task, its zero-buffer stream) read as the turn
    reads it, with the run's capability offering each event to `Turn.shortcut` or not; and how
    many deltas the shortcut took."""
    counter = itertools.count()
    monkeypatch.setattr(_event_stream, "uuid4", lambda: uuid.UUID(int=next(counter)))
    t = Turn(cast(Any, None), cast(Any, None), TurnLog(uuid.uuid4(), "owner"))
    stream = Counting(run_input=cast(Any, None), user_message_id=1, usage=dict)
    t._encode = stream
    taken = 0

    def offered(event: object) -> bool:
        nonlocal taken
        took = t.shortcut(event)
        taken += took
        return took

    agent: Agent[None, str] = Agent(FunctionModel(stream_function=words))

    @agent.tool_plain
    def lookup(term: str) -> str:
        return f"about {term}"

    quiet = AbstractCapability[Any]()
    hooks = TurnHooks(recorder=quiet, request_log=quiet, shortcut=offered if shortcut else None)
    async with agent.run_stream_events("look it up", capabilities=[hooks]) as events:
        passed = t._text_deltas(events, stream) if shortcut else events
        async for chunk in stream.transform_stream(passed):
            t._emit(stream.encode_event(chunk), t._sent.take(chunk))
    return [TIMESTAMP.sub("<time>", data) for data in t.log.data], taken


async def test_deltas_taken_in_the_runs_task_keep_the_streams_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    through_transform, _ = await run_turn(monkeypatch, shortcut=False)
    with_shortcut, taken = await run_turn(monkeypatch, shortcut=True)
    assert with_shortcut == through_transform
    deltas = [d for d in through_transform if '"type":"text-delta"' in d]
    assert [orjson.loads(d.removeprefix("data: "))["delta"] for d in deltas] == WORDS
    assert '"type":"tool-output-available"' in "".join(through_transform)
    assert 0 < taken < len(WORDS)  # some deltas met an event on its way and went behind it

"""The turn's short path for text deltas: the stream it writes is the transform's, byte for byte,
for plain answers, parts that follow each other, deltas the path leaves to the transform, and a
run that fails in the middle of a part (which the transform closes from the deltas it kept)."""

from __future__ import annotations

import itertools
import uuid
from collections.abc import AsyncIterator
from typing import Any, cast

import pytest
from pydantic_ai.messages import (
    PartDeltaEvent,
    PartEndEvent,
    PartStartEvent,
    TextPart,
    TextPartDelta,
    ThinkingPart,
    ThinkingPartDelta,
)
from pydantic_ai.ui import _event_stream
from pydantic_ai.ui.vercel_ai.response_types import TextDeltaChunk
from pydantic_core import PydanticSerializationError

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

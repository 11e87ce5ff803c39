"""The turn's outbox as the HTTP response reads it: each event as it comes when the reader
keeps up, everything already waiting in one write when it does not, and nothing after the end."""

from __future__ import annotations

import asyncio
from typing import Any, cast

from pydantic_ai.ui.vercel_ai.response_types import DataChunk, TextDeltaChunk

from app.agent.turn import Turn


def turn() -> Turn:
    return Turn(cast(Any, None), cast(Any, None))


async def test_a_reader_that_keeps_up_gets_each_event_on_its_own() -> None:
    t = turn()
    got: list[str] = []

    async def read() -> None:
        async for chunk in t.listen():
            got.append(chunk)

    reader = asyncio.create_task(read())
    for event in ("data: 1\n\n", "data: 2\n\n", "data: 3\n\n"):
        t._emit(event)
        await asyncio.sleep(0)  # the reader takes it before the next one
        await asyncio.sleep(0)
    t.end_stream()
    await reader
    assert got == ["data: 1\n\n", "data: 2\n\n", "data: 3\n\n"]


async def test_events_waiting_together_go_out_in_one_write_and_the_end_ends_it() -> None:
    t = turn()
    for event in ("data: a\n\n", "data: b\n\n", "data: c\n\n"):
        t._emit(event)
    t.end_stream()
    t._emit("data: never\n\n")  # after the end: not the reader's
    got = [chunk async for chunk in t.listen()]
    assert got == ["data: a\n\ndata: b\n\ndata: c\n\n"]


async def test_a_reader_that_leaves_stops_the_outbox_filling() -> None:
    t = turn()
    t._emit("data: 1\n\n")
    stream = t.listen()
    assert await anext(stream) == "data: 1\n\n"
    await stream.aclose()
    t._emit("data: 2\n\n")
    t.end_stream()
    assert t._outbox.qsize() == 1  # only the end marker: nothing piles up for nobody


async def test_a_rounds_row_gets_what_the_reader_was_handed_and_no_more() -> None:
    """Partial text is written up to what the response handed to the server: a process killed
    at any moment stores a prefix of what its client received."""
    t = turn()
    opened = DataChunk(type="data-assistant-message", data={"id": 7})
    t._emit("data: round\n\n", t._sent.take(opened))
    for piece in ("Hel", "lo"):
        t._emit(f"data: {piece}\n\n", t._sent.take(TextDeltaChunk(id="t", delta=piece)))
    assert t.unsaved() is None  # nothing has reached the reader yet
    stream = t.listen()
    assert await anext(stream) == "data: round\n\ndata: Hel\n\ndata: lo\n\n"
    assert t.unsaved() is None  # handed out, but the server has not taken it: the reader
    t._emit("data: !\n\n", t._sent.take(TextDeltaChunk(id="t", delta="!")))
    assert await anext(stream) == "data: !\n\n"  # ... took the batch before asking again
    mark = t.unsaved()
    assert mark is not None and mark.row() == (7, "Hello", None)
    t.saved(mark)
    assert t.unsaved() is None  # nothing new since the last write
    await stream.aclose()  # the client left: from now on all of it is written
    t._sent.take(TextDeltaChunk(id="t", delta=" world"))
    left = t.unsaved()
    assert left is not None and left.row() == (7, "Hello! world", None)

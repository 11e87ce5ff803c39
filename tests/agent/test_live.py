"""A turn's log as its readers take it: numbered events, one write for what waits, every reader
the same events whenever it comes, a bounded lag, keep-alives, and nothing after the end."""

from __future__ import annotations

import asyncio
import itertools
import uuid
from typing import Any, cast

import pytest
from pydantic_ai.ui.vercel_ai.response_types import DataChunk, TextDeltaChunk

from app.agent import live
from app.agent.live import DONE_EVENT, LiveTurns, TurnLog
from app.agent.turn import Turn


def turn() -> Turn:
    return Turn(cast(Any, None), cast(Any, None), TurnLog(uuid.uuid4(), "owner"))


async def test_a_reader_that_keeps_up_gets_each_event_on_its_own_numbered() -> None:
    t = turn()
    got: list[str] = []

    async def read() -> None:
        async for chunk in t.listen().batches():
            got.append(chunk)

    reader = asyncio.create_task(read())
    for event in ("data: 1\n\n", "data: 2\n\n", "data: 3\n\n"):
        t._emit(event)
        await asyncio.sleep(1.5 * live.COALESCE_SECONDS)  # the reader takes it before the next
    t._emit(DONE_EVENT)  # held back until the end
    t.end_stream()
    await reader
    assert got == [
        "id: 1\ndata: 1\n\n",
        "id: 2\ndata: 2\n\n",
        "id: 3\ndata: 3\n\n",
        "id: 4\ndata: [DONE]\n\n",
    ]


async def test_events_faster_than_the_coalescing_clock_go_out_together_after_the_first() -> None:
    """A token every millisecond: the first goes at once, the rest in writes at least
    `COALESCE_SECONDS` apart, and the end goes as soon as it comes."""
    t = turn()
    writes: list[tuple[float, str]] = []
    loop = asyncio.get_running_loop()

    async def read() -> None:
        async for chunk in t.listen().batches():
            writes.append((loop.time(), chunk))

    reader = asyncio.create_task(read())
    started = loop.time()
    for n in range(1, 41):
        t._emit(f"data: {n}\n\n")
        await asyncio.sleep(0.001)
    t._emit(DONE_EVENT)
    t.end_stream()
    await reader
    assert "".join(chunk for _, chunk in writes) == "".join(
        [f"id: {n}\ndata: {n}\n\n" for n in range(1, 41)] + ["id: 41\ndata: [DONE]\n\n"]
    )
    assert writes[0] == (writes[0][0], "id: 1\ndata: 1\n\n")
    assert writes[0][0] - started < live.COALESCE_SECONDS
    elapsed = loop.time() - started
    assert 2 <= len(writes) <= 2 + elapsed / live.COALESCE_SECONDS
    gaps = [b[0] - a[0] for a, b in itertools.pairwise(writes[:-1])]  # the end goes at once
    assert all(gap >= 0.9 * live.COALESCE_SECONDS for gap in gaps), gaps


async def test_events_waiting_together_go_out_in_one_write_and_the_end_ends_it() -> None:
    t = turn()
    for event in ("data: a\n\n", "data: b\n\n", "data: c\n\n"):
        t._emit(event)
    t._emit(DONE_EVENT)
    t.end_stream()
    got = [chunk async for chunk in t.listen().batches()]
    assert got == ["id: 1\ndata: a\n\nid: 2\ndata: b\n\nid: 3\ndata: c\n\nid: 4\ndata: [DONE]\n\n"]


@pytest.mark.parametrize("after", [0, 1, 2, 3, 4])
async def test_a_reader_after_event_n_gets_exactly_the_rest_whenever_it_comes(after: int) -> None:
    """Before the first event, in the middle, at the last event: the same tail, once each."""
    log = TurnLog(uuid.uuid4(), "owner")
    events = [f"data: {n}\n\n" for n in range(1, 5)] + [DONE_EVENT]
    early = log.follow(after)
    for event in events[:after]:
        log.append(event)
    late = log.follow(after)
    for event in events[after:]:
        log.append(event)
    log.end()
    want = "".join(f"id: {n}\n{event}" for n, event in enumerate(events, 1) if n > after)
    assert "".join([c async for c in early.batches()]) == want
    assert "".join([c async for c in late.batches()]) == want


async def test_a_reader_stops_at_a_hand_over_and_the_next_one_reads_on_from_it() -> None:
    log = TurnLog(uuid.uuid4(), "owner")
    for event in ('data: {"type":"start"}\n\n', "data: form\n\n", DONE_EVENT):
        log.append(event)
    first = "".join([c async for c in log.follow(0).batches()])
    assert first.endswith("id: 3\ndata: [DONE]\n\n")
    log.append('data: {"type":"start"}\n\n')
    log.append(DONE_EVENT)
    log.end()
    assert [c async for c in log.follow(3).batches()] == [
        'id: 4\ndata: {"type":"start"}\n\nid: 5\ndata: [DONE]\n\n'
    ]


async def test_a_reader_that_leaves_is_no_longer_followed() -> None:
    t = turn()
    t._emit("data: 1\n\n")
    reader = t.listen()
    stream = reader.batches()
    assert await anext(stream) == "id: 1\ndata: 1\n\n"
    assert t._listening
    await stream.aclose()
    assert not t._listening and t.log.readers == 0


async def test_a_reader_that_falls_too_far_behind_is_cut_and_the_turn_goes_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(live, "MAX_LAG", 10)
    log = TurnLog(uuid.uuid4(), "owner")
    stalled, keeping_up = log.follow(0), log.follow(0)
    cut: list[bool] = []
    stalled.on_cut(lambda: cut.append(True))
    for n in range(1, 31):
        log.append(f"data: {n}\n\n")  # never waits for anyone
        keeping_up.cursor = n  # this one takes each as it comes
    assert cut == [True] and stalled.was_cut and not stalled.following
    assert keeping_up.following and len(log) == 30
    assert [c async for c in stalled.batches()] == []  # it ends; it may come back


async def test_a_quiet_turn_sends_keep_alives(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(live, "KEEP_ALIVE_SECONDS", 0.05)
    log = TurnLog(uuid.uuid4(), "owner")
    stream = log.follow(0).batches()
    assert await anext(stream) == ": keep-alive\n\n"
    log.append("data: 1\n\n")
    assert await anext(stream) == "id: 1\ndata: 1\n\n"
    assert await anext(stream) == ": keep-alive\n\n"
    await stream.aclose()


async def test_a_rounds_row_gets_what_the_reader_was_handed_and_no_more() -> None:
    """Partial text is written up to what the response handed to the server: a process killed
    at any moment stores a prefix of what its client received."""
    t = turn()
    opened = DataChunk(type="data-assistant-message", data={"id": 7})
    t._emit("data: round\n\n", t._sent.take(opened))
    for piece in ("Hel", "lo"):
        t._emit(f"data: {piece}\n\n", t._sent.take(TextDeltaChunk(id="t", delta=piece)))
    stream = t.listen().batches()
    assert t.unsaved() is None  # nothing has reached the reader yet
    assert await anext(stream) == "id: 1\ndata: round\n\nid: 2\ndata: Hel\n\nid: 3\ndata: lo\n\n"
    assert t.unsaved() is None  # handed out, but the server has not taken it: the reader
    t._emit("data: !\n\n", t._sent.take(TextDeltaChunk(id="t", delta="!")))
    assert await anext(stream) == "id: 4\ndata: !\n\n"  # ... took the batch before asking again
    mark = t.unsaved()
    assert mark is not None and mark.row() == (7, "Hello", None)
    t.saved(mark)
    assert t.unsaved() is None  # nothing new since the last write
    await stream.aclose()  # the client left: from now on all of it is written
    t._sent.take(TextDeltaChunk(id="t", delta=" world"))
    left = t.unsaved()
    assert left is not None and left.row() == (7, "Hello! world", None)


async def test_the_registry_finds_a_turn_that_starts_after_its_reader_asked() -> None:
    turns = LiveTurns()
    chat = uuid.uuid4()
    waiting = asyncio.create_task(turns.wait_for(chat, "owner", 5))
    await asyncio.sleep(0)
    opened = turns.open(chat, "owner")
    assert await waiting is opened
    assert turns.by_owner("owner") is opened
    turns.close(opened)
    assert opened.ended and turns.get(chat) is None and turns.by_owner("owner") is None
    assert await turns.wait_for(chat, "owner", 0.01) is None

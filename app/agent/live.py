"""A running turn's events, numbered and kept, and every reader that follows them.

The turn appends each encoded event to its `TurnLog` once, framed with its SSE `id:` (its
number in the turn, from 1); every reader — the response that started the turn, a reload, another
tab, a reader in another worker fed by `app.agent.relay` — is a cursor into that one list, so an
event is encoded and framed once whatever the number of readers, and a reader that connects at
any moment (before the first event, in the middle, at the last) gets every event after its
`Last-Event-ID`, in order, none twice. The log lives while its turn runs and goes with it; after
that the stored chat is the truth.

A reader's queue is the stretch of the log between its cursor and the end, bounded by `MAX_LAG`:
the turn never waits for a reader, and a reader that falls that far behind (a client that stopped
reading, whose socket is full) is ended — its response is cut, and it may come back with
`Last-Event-ID`. The events themselves are kept once, for the turn, not per reader, so a stalled
reader costs no memory of its own.

A response reads a stream up to its `[DONE]`: the end of the turn, or the place where the turn
handed its client over to a form (`data-elicitation`), after which the request that answers reads
on from the next event. While nothing is sent for `KEEP_ALIVE_SECONDS` a reader sends an SSE
comment, so proxies that cut idle connections leave a quiet turn alone; one timer per process
watches every waiting reader, since a timer per wait would cost each reader something per event.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Final

KEEP_ALIVE_SECONDS = 15.0
KEEP_ALIVE: Final = ": keep-alive\n\n"
DONE_EVENT: Final = "data: [DONE]\n\n"
"""How the UI message stream's last event is written."""
COALESCE_SECONDS: Final = 0.01
"""The least time between two writes of a busy reader. Measured (bench/turn_overhead.py --parts
d, a token every 2 ms): a write per token cost the turn's process about 30 µs per token (the
reader's wake-up, the ASGI layers, the socket), 79 against 47 µs beyond pydantic-ai alone; a
person reading sees no difference at 100 writes a second."""
MAX_LAG: Final = 8192
"""Events a reader may have still to take before it is ended: far more than a client that reads
ever lags (the turn's whole answer is a few thousand events), far less than a stalled one would."""


class TurnLog:
    """The events of one turn, in order, framed as they go out; and the readers following them."""

    def __init__(self, chat_id: uuid.UUID, owner: str) -> None:
        self.chat_id = chat_id
        self.owner = owner
        self.events: list[str] = []
        """Each event as it goes out: `id: n`, then its `data:` line(s)."""
        self.data: list[str] = []
        """Each event's `data:` part alone, as a relay stores it."""
        self.dones: list[int] = []
        """The positions (from 0) of the `[DONE]` events: where a response ends."""
        self.ended = False
        self._readers: set[Reader] = set()
        self.on_append: Callable[[TurnLog, int], None] | None = None
        """Told of each new event (its position): the relay publishing it to other workers."""
        self.on_end: Callable[[TurnLog], None] | None = None

    def __len__(self) -> int:
        return len(self.events)

    @property
    def readers(self) -> int:
        return len(self._readers)

    def append(self, data: str) -> int:
        """Add an event (its encoded `data:` part); its number."""
        number = len(self.events) + 1
        self.events.append(f"id: {number}\n{data}")
        self.data.append(data)
        if data == DONE_EVENT:
            self.dones.append(number - 1)
        for reader in tuple(self._readers):
            if number - reader.cursor > MAX_LAG:
                reader.cut()
            else:
                reader.wake()
        if self.on_append is not None:
            self.on_append(self, number - 1)
        return number

    def end(self) -> None:
        """No event follows: every reader ends once it has taken what there is."""
        if self.ended:
            return
        self.ended = True
        for reader in tuple(self._readers):
            reader.wake()
        if self.on_end is not None:
            self.on_end(self)

    def follow(self, after: int = 0) -> Reader:
        """A reader of every event after number `after` (a `Last-Event-ID`), up to a `[DONE]`.

        A number past the events so far waits for the event after it, as the contract says;
        a replica (`app.agent.relay`) may not have read up to it yet."""
        return Reader(self, max(0, after))

    def response_end(self, cursor: int) -> int | None:
        """The position just past the first `[DONE]` at or after `cursor`, if one is there."""
        for position in self.dones:
            if position >= cursor:
                return position + 1
        return None


class Reader:
    """One response following a log: a cursor, a wake-up, and a way to be cut off."""

    def __init__(self, log: TurnLog, cursor: int) -> None:
        self.log = log
        self.cursor = cursor
        """How many of the log's events this reader has taken."""
        self.delivered = cursor
        """How many of them the server has sent on (it asked for the next batch since)."""
        self.was_cut = False
        self.quiet_since: float | None = asyncio.get_running_loop().time()
        """Since when the reader has sent nothing (None: a keep-alive is due)."""
        self._wake = asyncio.Event()
        self._cutters: list[Callable[[], object]] = []
        log._readers.add(self)

    @property
    def following(self) -> bool:
        """Whether the reader is still there (its client has not left, it was not cut)."""
        return self in self.log._readers

    def wake(self) -> None:
        self._wake.set()

    def cut(self) -> None:
        """End this reader now (it fell too far behind); whatever it was sending is abandoned."""
        self.was_cut = True
        self.close()
        for cutter in self._cutters:
            cutter()

    def on_cut(self, cutter: Callable[[], object]) -> None:
        self._cutters.append(cutter)

    def close(self) -> None:
        self.log._readers.discard(self)
        self._wake.set()

    async def batches(self) -> AsyncIterator[str]:
        """The events, joined: every event waiting when the response asks goes out in one write
        (a busy turn sends a batch where it would pass each event through every ASGI layer),
        an idle one each as it comes. An event that comes less than `COALESCE_SECONDS` after the
        last write waits for the process's next tick (`_ticks`), gathering what follows it, so a
        model streaming a token every 2 ms costs a write every 10 ms rather than five; the first
        event after a pause goes at once. Ends after a `[DONE]`, or when the log ends."""
        log = self.log
        loop = asyncio.get_running_loop()
        sent_at = -COALESCE_SECONDS
        try:
            while not self.was_cut:
                if self.cursor < len(log.events):
                    stop = log.response_end(self.cursor)
                    if stop is None and loop.time() - sent_at < COALESCE_SECONDS:
                        sent_at = -COALESCE_SECONDS  # what the tick finds goes
                        await _next_tick()
                        continue
                    end = len(log.events) if stop is None else stop
                    batch = log.events[self.cursor : end]
                    self.cursor = end
                    yield batch[0] if len(batch) == 1 else "".join(batch)
                    self.delivered = end
                    self.quiet_since = sent_at = loop.time()
                    if stop is not None:
                        return
                    continue
                if log.ended:
                    return
                self._wake.clear()
                _quiet.add(self)
                _watch_quiet()
                try:
                    await self._wake.wait()
                finally:
                    _quiet.discard(self)
                if self.quiet_since is None and self.cursor >= len(log.events):
                    self.quiet_since = asyncio.get_running_loop().time()
                    yield KEEP_ALIVE
        finally:
            self.close()


async def _next_tick() -> None:
    """Wait for the next tick of the process's coalescing clock: one timer for every reader
    holding events back, rather than one per reader."""
    global _tick
    loop = asyncio.get_running_loop()
    if _tick is None or _tick[1].is_set() or _tick[0] is not loop:
        _tick = loop, asyncio.Event()
        loop.call_later(COALESCE_SECONDS, _tick[1].set)
    await _tick[1].wait()


_tick: tuple[asyncio.AbstractEventLoop, asyncio.Event] | None = None
"""Set at the next tick (with the loop it belongs to): the readers holding events back wait on
it."""

_quiet: set[Reader] = set()
"""The readers waiting for an event, which one timer per process looks at (`_keep_alives`)."""
_timer: asyncio.Task[None] | None = None


def _watch_quiet() -> None:
    global _timer
    loop = asyncio.get_running_loop()
    if _timer is None or _timer.done() or _timer.get_loop() is not loop:
        _timer = loop.create_task(_keep_alives(), name="hearth-keep-alives")


async def _keep_alives() -> None:
    """Once a second (or faster, for a shorter keep-alive), wake the readers that have sent
    nothing for `KEEP_ALIVE_SECONDS`: one timer for all of them, rather than one per event
    each reader waits for. It stops when no reader waits."""
    loop = asyncio.get_running_loop()
    while _quiet:
        await asyncio.sleep(min(1.0, KEEP_ALIVE_SECONDS / 4))
        now = loop.time()
        for reader in tuple(_quiet):
            if reader.quiet_since is not None and now - reader.quiet_since >= KEEP_ALIVE_SECONDS:
                reader.quiet_since = None
                reader.wake()


class LiveTurns:
    """The logs of the turns running in this process, by chat."""

    def __init__(self) -> None:
        self._by_chat: dict[uuid.UUID, TurnLog] = {}
        self._by_owner: dict[str, TurnLog] = {}
        self._changed = asyncio.Event()

    def open(self, chat_id: uuid.UUID, owner: str) -> TurnLog:
        log = TurnLog(chat_id, owner)
        self._by_chat[chat_id] = log
        self._by_owner[owner] = log
        self._changed.set()
        self._changed = asyncio.Event()
        return log

    def close(self, log: TurnLog) -> None:
        log.end()
        if self._by_chat.get(log.chat_id) is log:
            del self._by_chat[log.chat_id]
        if self._by_owner.get(log.owner) is log:
            del self._by_owner[log.owner]

    def get(self, chat_id: uuid.UUID) -> TurnLog | None:
        return self._by_chat.get(chat_id)

    def by_owner(self, owner: str) -> TurnLog | None:
        return self._by_owner.get(owner)

    async def wait_for(self, chat_id: uuid.UUID, owner: str, seconds: float) -> TurnLog | None:
        """The log of the turn `owner` runs in the chat, once it opens: a reader may come between
        the lease being taken and the turn starting. None if it does not open in time."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + seconds
        while (log := self._by_chat.get(chat_id)) is None or log.owner != owner:
            left = deadline - loop.time()
            if left <= 0:
                return None
            try:
                async with asyncio.timeout(left):
                    await self._changed.wait()
            except TimeoutError:
                return None
        return log

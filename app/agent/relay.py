"""Live turns across worker processes, through PostgreSQL and nothing else.

A reader in worker B of a turn running in worker A: B asks for the turn (a notice `f <owner>` on
the channel every worker listens to); A, which holds the turn's log (`app.agent.live`), starts
publishing it: the events so far, then each new one, as rows of `live_events`; B copies the rows
into a replica of the log, which its readers follow like any local log. Nothing is written for a
turn nobody follows from elsewhere, so a turn without remote readers costs what it cost before.

Both directions batch by construction, which is what keeps a hundred turns cheap. A's publisher
writes every event of every published turn that arrived since its last write in one statement,
which also sends the notices and, on commit, makes rows and notices visible at once; while one
write is in flight the next batch gathers. The notices carry the events themselves (`d`, several
turns' events packed into each, `NOTICE_BYTES` at most), so a replica that is up to date appends
them as they come and B asks the database for nothing; the rows are there for what a notice
cannot carry (an event too large: `e <owners>` says new rows wait) and for a replica that is
behind: a new one, one that missed notices while its connection was down, or one that finds a
gap. B's fetcher answers every such case that came since its last read with one query over all
of them, each from where its replica stands. A published turn that ends sends `x <owner>` after
its last events, so replicas end exactly at the end of the turn. Measured (a profile of the
readers' worker in bench/live.py: 100 turns, each followed by two readers there): reading the
rows after each notice took a ninth of that worker's CPU, and carrying the events halves it.

Each worker holds two connections of its own outside the pool, made with asyncpg directly (the
listening one must stay the same connection, and neither should take a pool slot a request
needs, nor the ORM's time per statement on this path): one listens and reads, one writes. Once a
second the watcher asks the database for the leases of the turns its replicas follow: a turn
whose lease is gone without its `x` (its worker died, or the notice was lost while a connection
was down) ends its replicas after a short grace, once what was written has been read. It also
repeats the requests not answered yet (the owning worker may not have started the turn when the
first came) and deletes what turns that ended a while ago, or whose process died, left behind.
A lost connection is made again; a notice missed meanwhile is made up for by the next fetch,
since a replica always reads from where it stands.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Final

import asyncpg  # type: ignore[import-untyped]
import orjson
from sqlalchemy.engine import make_url

from app.agent.live import LiveTurns, Reader, TurnLog
from app.clock import Clock

log = logging.getLogger("hearth.live")

CHANNEL: Final = "hearth_live"
NOTICE_BYTES: Final = 7000
"""A notice's payload at most (PostgreSQL's limit is 8000 bytes)."""
WATCH_SECONDS: Final = 1.0
GONE_GRACE_SECONDS: Final = 3.0
"""How long a replica waits for the end of a turn whose lease is gone before it ends anyway."""
KEEP_SECONDS: Final = 60.0
"""How long a turn's rows stay after its last one: time for every reader to take the end."""
FORGET_EVERY_SECONDS = 15.0
"""How often each worker deletes the rows of turns that ended (or died) a while ago."""
FIRST_EVENT_SECONDS: Final = 5.0
"""How long a new remote reader waits for the turn's first event before it is answered."""
RECONNECT_SECONDS: Final = 1.0
BATCH_SECONDS: Final = 0.005
"""The least time between two writes (and between two reads) of one process: an event after a
quiet spell goes at once, and under load each statement carries what came meanwhile. Measured
(bench/live.py, 100 turns): without it, writing every event as soon as the last write ended cost
the turn's worker 18 ms of CPU per turn of 111 events, a quarter of the turn's own cost."""

INSERT_AND_NOTIFY: Final = """
WITH added AS (
    INSERT INTO live_events (owner, seq, data, created_at)
    SELECT owner, seq, data, $4::timestamptz
    FROM unnest($1::text[], $2::int[], $3::text[]) AS r(owner, seq, data)
    ON CONFLICT DO NOTHING
)
SELECT pg_notify('hearth_live', notice) FROM unnest($5::text[]) AS n(notice)
"""
FETCH: Final = """
SELECT e.owner, e.seq, e.data FROM live_events e
JOIN unnest($1::text[], $2::int[]) AS c(owner, after) ON e.owner = c.owner AND e.seq > c.after
ORDER BY e.owner, e.seq
"""
LIVE_LEASES: Final = """
SELECT turn_owner FROM chats
WHERE turn_owner = ANY($1::text[]) AND turn_lease_until >= $2::timestamptz
"""
FORGET: Final = """
DELETE FROM live_events WHERE owner IN (
    SELECT owner FROM live_events GROUP BY owner HAVING max(created_at) < $1::timestamptz
) AND owner NOT IN (
    SELECT turn_owner FROM chats
    WHERE turn_owner IS NOT NULL AND turn_lease_until >= $2::timestamptz
)
"""


def asyncpg_arguments(url: str) -> dict[str, Any]:
    """`asyncpg.connect` arguments for a SQLAlchemy `postgresql+asyncpg://` URL."""
    parsed = make_url(url)
    arguments: dict[str, Any] = parsed.translate_connect_args(username="user")
    arguments.update(parsed.query)
    return arguments


def event_notices(rows: list[tuple[str, int, str]]) -> tuple[list[str], list[str]]:
    """The `d` notices carrying `rows` (owner, seq, data; each owner's in order), each within
    `NOTICE_BYTES`: `d [[owner, first seq, [data, …]], …]`; and the owners whose events, from
    one too large for a notice on, are left to the rows (an `e` notice each)."""
    runs: dict[str, tuple[int, list[bytes]]] = {}
    left: dict[str, None] = {}
    for owner, seq, data in rows:
        if owner in left:
            continue
        event = orjson.dumps(data)
        if len(event) + len(owner) + 32 > NOTICE_BYTES:
            left[owner] = None
            continue
        runs.setdefault(owner, (seq, []))[1].append(event)
    pieces: list[bytes] = []
    for owner, (first, events) in runs.items():
        head = orjson.dumps(owner)
        taken: list[bytes] = []
        size = 0
        for event in events:
            if taken and len(head) + size + len(event) + 32 > NOTICE_BYTES:
                pieces.append(_piece(head, first, taken))
                first, taken, size = first + len(taken), [], 0
            taken.append(event)
            size += len(event) + 1
        pieces.append(_piece(head, first, taken))
    out: list[str] = []
    packed: list[bytes] = []
    size = 4  # `d [` and `]`
    for piece in pieces:
        if packed and size + len(piece) + 1 > NOTICE_BYTES:
            out.append("d [" + b",".join(packed).decode() + "]")
            packed, size = [], 4
        packed.append(piece)
        size += len(piece) + 1
    if packed:
        out.append("d [" + b",".join(packed).decode() + "]")
    return out, list(left)


def _piece(owner: bytes, first: int, events: list[bytes]) -> bytes:
    return b"[" + owner + b"," + str(first).encode() + b",[" + b",".join(events) + b"]]"


def notices(kind: str, owners: list[str]) -> list[str]:
    """`kind owner owner …` payloads, each within `NOTICE_BYTES`."""
    out, line = [], kind
    for owner in owners:
        if len(line) + 1 + len(owner) > NOTICE_BYTES:
            out.append(line)
            line = kind
        line += " " + owner
    if line != kind:
        out.append(line)
    return out


@dataclass(eq=False)
class Replica:
    """This process's copy of a turn running in another one, for the readers following it."""

    log: TurnLog
    ending: bool = False
    """The turn ended: end the replica after the next read."""
    gone_at: float | None = None
    """When the watcher first found the turn's lease gone."""
    idle_ticks: int = 0
    first: asyncio.Event = field(default_factory=asyncio.Event)


class PostgresRelay:
    def __init__(self, database_url: str, live: LiveTurns, clock: Clock) -> None:
        self._connect_arguments = asyncpg_arguments(database_url)
        self._live = live
        self._clock = clock
        self._replicas: dict[str, Replica] = {}
        """owner -> this process's copy of a turn running elsewhere."""
        self._rows: list[tuple[str, int, str]] = []
        """(owner, seq, data) of the published turns' events not written yet."""
        self._ended: list[str] = []
        self._asked: list[str] = []
        """Owners whose turns this process asks for (`f` notices to send)."""
        self._write_wake = asyncio.Event()
        self._dirty: set[str] = set()
        self._read_wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._reading = asyncio.Lock()
        """The listening connection reads for the fetcher and the watcher, one at a time."""
        self.connected = asyncio.Event()
        self._writer_pid: int | None = None
        """The backend of this process's writing connection, whose own `d` notices it skips."""

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="hearth-live-relay")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        for replica in list(self._replicas.values()):
            replica.log.end()
        self._replicas.clear()

    async def _run(self) -> None:
        while True:
            try:
                await self._serve()
            except asyncio.CancelledError:
                raise
            except Exception:  # the database went away: connect again, and read on from there
                log.warning("the live-turn relay lost its database connection", exc_info=True)
            self.connected.clear()
            await asyncio.sleep(RECONNECT_SECONDS)

    async def _serve(self) -> None:
        reading = await asyncpg.connect(**self._connect_arguments)
        writing = await asyncpg.connect(**self._connect_arguments)
        self._writer_pid = writing.get_server_pid()
        try:
            await reading.add_listener(CHANNEL, self._notice)
            self._dirty.update(self._replicas)  # whatever was missed while away
            self._asked.extend(o for o, r in self._replicas.items() if not len(r.log))
            self._read_wake.set()
            self._write_wake.set()
            self.connected.set()
            async with asyncio.TaskGroup() as group:
                group.create_task(self._write(writing))
                group.create_task(self._read(reading))
                group.create_task(self._watch(reading))
        finally:
            for connection in (reading, writing):
                with contextlib.suppress(Exception):
                    await connection.close(timeout=2)

    # -- publishing (the worker that runs the turn) -----------------------------------------

    def _publish(self, turn: TurnLog) -> None:
        if turn.on_append is not None:
            return  # published already
        turn.on_append = self._appended
        turn.on_end = self._turn_ended
        self._rows.extend((turn.owner, seq, data) for seq, data in enumerate(turn.data, 1))
        if turn.ended:
            self._ended.append(turn.owner)
        self._write_wake.set()

    def _appended(self, turn: TurnLog, position: int) -> None:
        self._rows.append((turn.owner, position + 1, turn.data[position]))
        self._write_wake.set()

    def _turn_ended(self, turn: TurnLog) -> None:
        self._ended.append(turn.owner)
        self._write_wake.set()

    async def _write(self, connection: asyncpg.Connection) -> None:
        while True:
            await self._write_wake.wait()
            self._write_wake.clear()
            rows, ended, asked = self._rows, self._ended, self._asked
            if not (rows or ended or asked):
                continue
            self._rows, self._ended, self._asked = [], [], []
            carried, left = event_notices(rows)
            said = carried + notices("e", left) + notices("x", ended) + notices("f", asked)
            try:
                await connection.execute(
                    INSERT_AND_NOTIFY,
                    [owner for owner, _, _ in rows],
                    [seq for _, seq, _ in rows],
                    [data for _, _, data in rows],
                    self._clock.now(),
                    said,
                )
            except BaseException:
                self._rows[:0], self._ended[:0], self._asked[:0] = rows, ended, asked
                raise
            await asyncio.sleep(BATCH_SECONDS)

    # -- following (a worker with readers of a turn that runs elsewhere) ---------------------

    async def follow(self, chat_id: uuid.UUID, owner: str, after: int) -> Reader | None:
        """A reader of the turn `owner` runs in another process, from the event after `after`;
        None when that turn ends before it sends anything."""
        replica = self._replicas.get(owner)
        if replica is None:
            replica = Replica(TurnLog(chat_id, owner))
            self._replicas[owner] = replica
            self._asked.append(owner)
            self._write_wake.set()
            self._dirty.add(owner)  # it may be published for another reader already
            self._read_wake.set()
        reader = replica.log.follow(after)
        if not len(replica.log):
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(FIRST_EVENT_SECONDS):
                    await replica.first.wait()
            if not len(replica.log) and replica.log.ended:
                reader.close()
                return None
        return reader

    def _notice(self, _connection: Any, pid: int, _channel: str, payload: str) -> None:
        kind, _, rest = payload.partition(" ")
        if kind == "d":
            if self._replicas and pid != self._writer_pid:  # not this process's own events
                self._carried(rest)
            return
        owners = rest.split()
        if kind == "f":
            for owner in owners:
                if (turn := self._live.by_owner(owner)) is not None:
                    self._publish(turn)
            return
        woke = False
        for owner in owners:
            if (replica := self._replicas.get(owner)) is not None:
                if kind == "x":
                    replica.ending = True
                self._dirty.add(owner)
                woke = True
        if woke:
            self._read_wake.set()

    def _carried(self, rest: str) -> None:
        """Append the events a `d` notice carries to the replicas they continue; a replica
        they do not continue (it missed some) reads the rows instead."""
        try:
            parsed = orjson.loads(rest)
            if not isinstance(parsed, list):
                raise TypeError("not a list of turns")
            carried = [(str(o), int(f), [str(d) for d in e]) for o, f, e in parsed]
        except (ValueError, TypeError):  # not hearth's: every replica reads the rows instead
            log.warning("a live-turn notice could not be read: %.80s", rest)
            self._dirty.update(self._replicas)
            self._read_wake.set()
            return
        behind = False
        for owner, first, events in carried:
            replica = self._replicas.get(owner)
            if replica is None:
                continue
            turn_log = replica.log
            if first > len(turn_log) + 1:
                self._dirty.add(owner)
                behind = True
                continue
            for data in events[len(turn_log) + 1 - first :]:
                turn_log.append(data)
            if len(turn_log):
                replica.first.set()
        if behind:
            self._read_wake.set()

    async def _read(self, connection: asyncpg.Connection) -> None:
        while True:
            await self._read_wake.wait()
            self._read_wake.clear()
            dirty, self._dirty = self._dirty, set()
            wanted = [(o, r) for o in dirty if (r := self._replicas.get(o)) is not None]
            if not wanted:
                continue
            ending = {owner for owner, replica in wanted if replica.ending}
            """Told of their end before this read: it reads their last rows. (An end told
            while the read is under way waits for the next read, which the notice asked for.)"""
            try:
                async with self._reading:
                    rows = await connection.fetch(
                        FETCH, [o for o, _ in wanted], [len(r.log) for _, r in wanted]
                    )
            except BaseException:
                self._dirty |= dirty
                raise
            for owner, seq, data in rows:
                replica = self._replicas.get(owner)
                if replica is not None and seq == len(replica.log) + 1:
                    replica.log.append(data)
            for owner, replica in wanted:
                if len(replica.log):
                    replica.first.set()
                if owner in ending:
                    self._end(owner, replica)
            await asyncio.sleep(BATCH_SECONDS)

    def _end(self, owner: str, replica: Replica) -> None:
        replica.log.end()
        replica.first.set()
        if self._replicas.get(owner) is replica:
            del self._replicas[owner]

    async def _watch(self, reading: asyncpg.Connection) -> None:
        loop = asyncio.get_running_loop()
        forgot_at = 0.0
        while True:
            await asyncio.sleep(WATCH_SECONDS)
            now = loop.time()
            for owner, replica in list(self._replicas.items()):
                if not replica.log.readers:
                    replica.idle_ticks += 1
                    if replica.idle_ticks > 1:
                        self._end(owner, replica)
                else:
                    replica.idle_ticks = 0
            unanswered = [o for o, r in self._replicas.items() if not len(r.log)]
            if unanswered:
                self._asked.extend(unanswered)
                self._write_wake.set()
            if self._replicas:
                async with self._reading:
                    leases = await reading.fetch(
                        LIVE_LEASES, list(self._replicas), self._clock.now()
                    )
                held = {row[0] for row in leases}
                for owner, replica in list(self._replicas.items()):
                    if owner in held:
                        replica.gone_at = None
                    elif replica.gone_at is None:
                        replica.gone_at = now
                        self._dirty.add(owner)  # read what was written before it went
                        self._read_wake.set()
                    elif now - replica.gone_at >= GONE_GRACE_SECONDS:
                        replica.ending = True
                        self._dirty.add(owner)
                        self._read_wake.set()
            if now - forgot_at >= FORGET_EVERY_SECONDS:
                forgot_at = now
                moment = self._clock.now()
                async with self._reading:
                    await reading.execute(FORGET, moment - timedelta(seconds=KEEP_SECONDS), moment)

"""SQLite through aiosqlite: each statement on the event loop's thread when nothing is in its
way, otherwise in one trip to the connection's thread.

aiosqlite runs a connection's calls on a thread of its own, and SQLAlchemy's adapter makes one
trip there per DBAPI call: a cursor, the statement, its rows, the cursor's close. A `SELECT`
was four trips and an `UPDATE` three, each a hand-over between the event loop and the thread
(a queue, a wake-up, a future set from the thread): about 60 us of CPU and 75 us of waiting
apiece on the benchmark machine, more than SQLite took to run the statement. The cursor here
makes the same calls on the thread in one function and brings back the description, the
counts and every row at once: one trip per statement (`bench/turn_overhead.py` a, b and d).

Everything else is SQLAlchemy's aiosqlite adapter as it is: transactions, isolation levels,
errors (sqlite3's own, raised on the thread and re-raised here), connection set-up and
termination. A server-side cursor, which hearth never asks for, keeps the adapter's own
trips, since its rows are fetched as they are read. The adapter itself hands calls to
aiosqlite's thread the same way for isolation levels (`_conn`, its queue); `_execute` is
aiosqlite's own function for running a call there. A commit or a rollback with no transaction
open, which sqlite3 would skip, makes no trip at all: the pool rolls back every connection it
gets back, and most had only read (the request's, once authentication and a send are done).

Writers take turns in the process (`WriteTurn`) instead of in SQLite. SQLite lets one
connection write at a time, and one that finds the file locked sleeps in its busy handler (1, 2,
5, 10, 15, 20, 25 ms and on, up to 100 ms a time) before it looks again, so under a burst the
lock can sit free while the writers waiting for it sleep. Here a statement that may write
first takes a lock of the database's on the connection's thread, held until its transaction
ends (commit or rollback, also on the thread): a writer that waits, waits on its own thread,
and starts as soon as the one before it has committed, without a trip through the event loop
in between. Reads
never wait. A writer in another process (a CLI command) still meets SQLite's own lock and busy
timeout, which stay as they were; the lock here is given up after the same timeout, with the
error SQLite would raise.

A transaction of several statements still holds the lock for as many trips, and under load a
trip's end waits its turn in a busy event loop: the send's four statements and commit held it
for 37 ms at the median, 4 s of a 6 s burst of 100 sends (`bench/turn_overhead.py` b on
SQLite, where that burst reached its last first text 4.5-7.4 s after it was sent).
`in_one_trip` runs a transaction whole on the connection's thread instead: the same Core
statements, compiled and typed by the same engine (its events fire, so tracing and statement
counts see them), through a SQLAlchemy `Connection` lent the thread's sqlite3 connection
(`_Lent`) for the one call. With both, that burst reached its last first text after 4.0-5.0 s
against 4.6-6.1 s before, in alternated runs of one sitting; one turn alone reached its first
text 0.6-0.9 ms sooner at the median (`bench/turn_overhead.py` a).

Most statements need no thread at all: a read by primary key or index, or a write of a row,
takes SQLite a few µs, against the tens of a trip each way. So a statement runs on the event
loop's thread (`OneTripConnection.run_here`, one at a time per connection, the sqlite3
connection shared with its thread: `check_same_thread` is off) unless something would make it
wait, and only then goes to the thread as above:
- a write while another connection holds the write turn (it would wait for the turn);
- a transaction's first write that finds SQLite's lock taken by another process or engine:
  that first write is made with SQLite's busy timeout at 0, and one that meets the lock is
  rolled back with the transaction it began and sent to the thread, which waits as SQLite would;
- a read that runs past `HERE_BUDGET_S` (a scan, an aggregate over a large table): SQLite's
  progress handler interrupts it, and it runs again on the thread, the loop having been held
  no longer than the budget. A read inside the connection's own write transaction is not
  interrupted, nor is a write (SQLite would roll its transaction back).
Commits and rollbacks run there too, which is why SQLite's own checkpoints are off on these
connections (`CHECKPOINT_EVERY`): they run in the commit that crosses their threshold. The
cost is a loop held for as long as a long write takes (a cascade over thousands of rows);
reads pay it no more than the budget, and waiting is never done there. At N = 100 turns at
once (`bench/turn_overhead.py` b on SQLite), the server's CPU went from 39.9-40.7 to 32.3-33.2
ms a turn and the burst's last first text from 3.7-3.8 s to 2.8-3.1 s (alternated runs); a
50-token turn in a burst of 20 (d) from 33.5-34.5 to 22.5-24.5 ms.
"""

from __future__ import annotations

import collections
import contextvars
import functools
import itertools
import math
import re
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar, cast

import aiosqlite
from sqlalchemy import Connection, Engine
from sqlalchemy.connectors.asyncio import AsyncAdapt_dbapi_connection, AsyncIODBAPIConnection
from sqlalchemy.dialects.sqlite.aiosqlite import (
    AsyncAdapt_aiosqlite_connection,
    AsyncAdapt_aiosqlite_cursor,
    AsyncAdapt_aiosqlite_dbapi,
)
from sqlalchemy.exc import OperationalError
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.pool import PoolProxiedConnection
from sqlalchemy.util import EMPTY_DICT, await_

T = TypeVar("T")

BUSY_TIMEOUT_S = 10.0
"""How long a writer waits for another to finish, in SQLite (`busy_timeout`) and here."""
BUSY_TIMEOUT_MS = int(BUSY_TIMEOUT_S * 1000)

HERE_BUDGET_S = 0.002
"""How long a read may run on the event loop's thread before it is interrupted and sent to the
connection's own thread instead."""

PROGRESS_STEPS = 1000
"""SQLite virtual-machine steps between two looks at the clock: a few µs of work, so a read is
stopped close to its budget, and a statement of a few hundred steps never looks at all."""

CHECKPOINT_EVERY = 200
"""Commits of an engine between two checkpoints of the WAL, on a connection's thread. SQLite's
own (`wal_autocheckpoint`, off on these connections) runs in the commit that crosses 1000
pages, which may now be on the event loop's thread: 7-8 ms there (copying the pages back and
syncing the file) against 19 µs for a commit at the median, on the benchmark machine."""

_Outcome = tuple[Any, int, int | None, list[Any]]
"""What a statement leaves: its description, row count, last row id and rows."""

_READS = frozenset(("SELECT", "VALUES", "PRAGMA", "EXPLAIN", "BEGIN", "SAVEPOINT", "RELEASE"))
"""First words of statements that take no write turn."""

_ENDS = frozenset(("COMMIT", "END", "ROLLBACK"))
"""First words of statements that end a transaction, which gives the turn back: no turn taken."""

_WRITE_WORD = re.compile(r"\b(INSERT|UPDATE|DELETE|REPLACE)\b", re.IGNORECASE)


@functools.lru_cache(maxsize=2048)
def may_write(operation: str) -> bool:
    """Whether `operation` may write: anything not known to be a read is taken to (a `WITH`
    is a write if a writing word appears in it). Statements are SQLAlchemy's cached strings,
    so each is looked at once."""
    head = operation.lstrip()[:12].split(None, 1)
    word = head[0].upper() if head else ""
    if word == "WITH":
        return _WRITE_WORD.search(operation) is not None
    return word not in _READS and word not in _ENDS


class WriteTurn:
    """A connection's share of its database's write lock (one `threading.Lock` per engine),
    waited for on the connection's thread, or taken on the event loop's when it is free
    (`try_take`), and given back where the transaction ends (see the module's docstring)."""

    __slots__ = ("_lock", "held")

    def __init__(self, lock: threading.Lock) -> None:
        self._lock = lock
        self.held = False

    def take(self) -> None:
        if self.held:
            return
        if not self._lock.acquire(timeout=BUSY_TIMEOUT_S):
            raise sqlite3.OperationalError("database is locked")
        self.held = True

    def try_take(self) -> bool:
        """Take the turn if no other connection holds it, without waiting."""
        if not self.held and self._lock.acquire(blocking=False):
            self.held = True
        return self.held

    def give(self) -> None:
        if self.held:
            self.held = False
            self._lock.release()


def _run(
    connection: sqlite3.Connection,
    turn: WriteTurn,
    operation: str,
    parameters: Sequence[Any] | None,
) -> _Outcome:
    if may_write(operation):
        turn.take()
    cursor = connection.cursor()
    try:
        cursor.execute(operation, () if parameters is None else parameters)
        description = cursor.description
        rows = cursor.fetchall() if description else []
        return description, cursor.rowcount, cursor.lastrowid, rows
    finally:
        cursor.close()
        _ended(connection, turn)


def _run_many(
    connection: sqlite3.Connection,
    turn: WriteTurn,
    operation: str,
    parameters: Sequence[Sequence[Any]],
) -> _Outcome:
    if may_write(operation):
        turn.take()
    cursor = connection.cursor()
    try:
        cursor.executemany(operation, parameters)
        return cursor.description, cursor.rowcount, cursor.lastrowid, []
    finally:
        cursor.close()
        _ended(connection, turn)


def _ended(connection: sqlite3.Connection, turn: WriteTurn) -> None:
    """Give the write turn back once `connection` is out of its transaction (a statement that
    fails inside one keeps it: the transaction ends with a rollback)."""
    if not connection.in_transaction:
        turn.give()


def _checkpoint(connection: sqlite3.Connection) -> None:
    connection.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()


def _commit(connection: sqlite3.Connection, turn: WriteTurn) -> None:
    try:
        connection.commit()
    finally:
        _ended(connection, turn)


def _rollback(connection: sqlite3.Connection, turn: WriteTurn) -> None:
    try:
        connection.rollback()
    finally:
        _ended(connection, turn)


class OneTripCursor(AsyncAdapt_aiosqlite_cursor):
    """A client-side cursor whose statement, rows and close are one call on the thread."""

    __slots__ = ("_arraysize", "_description", "_lastrowid", "_rowcount")

    def __init__(self, adapt_connection: AsyncAdapt_dbapi_connection) -> None:
        self._adapt_connection = adapt_connection
        self._connection = adapt_connection._connection
        self._soft_closed_memoized = EMPTY_DICT
        self._rows = collections.deque()
        self._description: Any = None
        self._rowcount = -1
        self._lastrowid: int | None = None
        self._arraysize = 1  # sqlite3's default

    @property
    def description(self) -> Any:
        return self._description

    @property
    def rowcount(self) -> int:
        return self._rowcount

    @property
    def arraysize(self) -> int:
        return self._arraysize

    @arraysize.setter
    def arraysize(self, value: int) -> None:
        self._arraysize = value

    @property
    def lastrowid(self) -> int | None:  # type: ignore[override]
        return self._lastrowid

    async def _execute_async(self, operation: Any, parameters: Any) -> None:
        await self._trip(_run, operation, parameters)

    async def _executemany_async(self, operation: Any, seq_of_parameters: Any) -> None:
        await self._trip(_run_many, operation, seq_of_parameters)

    async def _trip(self, call: Any, operation: Any, parameters: Any) -> None:
        connection: aiosqlite.Connection = self._connection  # type: ignore[assignment]
        adapted: OneTripConnection = self._adapt_connection  # type: ignore[assignment]
        if call is _run and not adapted._execute_mutex.locked():
            here = adapted.run_here(operation, parameters)
            if here is not None:
                self._description, self._rowcount, self._lastrowid, rows = here
                self._rows = collections.deque(rows)
                return
        async with adapted._execute_mutex:
            outcome: _Outcome = await connection._execute(
                call, connection._conn, adapted.turn, operation, parameters
            )
        self._description, self._rowcount, self._lastrowid, rows = outcome
        self._rows = collections.deque(rows)

    async def _async_soft_close(self) -> None:
        """Nothing stays open on the thread: the cursor there closed with its statement."""

    def close(self) -> None:
        self._rows.clear()


class OneTripConnection(AsyncAdapt_aiosqlite_connection):
    """The adapter's connection with `OneTripCursor`s, running statements on the event loop's
    thread where nothing is in their way; its commit and rollback give back the database's
    write turn as soon as the transaction has ended."""

    __slots__ = ("_deadline", "turn")
    _cursor_cls = OneTripCursor

    def __init__(self, dbapi: OneTripDBAPI, connection: AsyncIODBAPIConnection) -> None:
        super().__init__(dbapi, connection)
        self.turn = WriteTurn(dbapi.write_lock)
        self._deadline = math.inf
        """When the read running on the loop's thread is interrupted (`perf_counter`)."""

    def _late(self) -> bool:
        """SQLite's progress handler: whether the statement running here is past its time."""
        return time.perf_counter() > self._deadline

    def _first_write(
        self, raw: sqlite3.Connection, operation: str, parameters: Sequence[Any] | None
    ) -> _Outcome | None:
        """A transaction's first write, which takes SQLite's own lock. Another process (or
        engine) may hold that, and waiting for it here would hold the event loop: so SQLite is
        told not to wait, and a write that finds the lock taken is undone with the transaction
        it began and goes to the thread, which waits as SQLite would."""
        raw.execute("PRAGMA busy_timeout = 0")
        try:
            return _run(raw, self.turn, operation, parameters)
        except sqlite3.OperationalError as error:
            if error.sqlite_errorcode & 0xFF != sqlite3.SQLITE_BUSY:
                raise
            raw.rollback()
            self.turn.give()
            return None
        finally:
            raw.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")

    def run_here(self, operation: str, parameters: Sequence[Any] | None) -> _Outcome | None:
        """The statement run on the event loop's thread, or None where it goes to the thread:
        a write while another connection holds the write turn, a transaction's first write
        that may wait for SQLite's lock (`_first_write`), or a read that ran past
        `HERE_BUDGET_S` (interrupted, with nothing done: it runs again there)."""
        raw: sqlite3.Connection = self._connection._conn
        if may_write(operation):
            if self.turn.held:  # SQLite's lock is this connection's already
                return _run(raw, self.turn, operation, parameters)
            if not self.turn.try_take():
                return None
            if raw.in_transaction:  # begun by a read (a savepoint): the thread's, as it may wait
                self.turn.give()
                return None
            return self._first_write(raw, operation, parameters)
        if self.turn.held:  # a read inside this connection's own write: as short as its writes
            return _run(raw, self.turn, operation, parameters)
        # The handler is set for this read alone: on the thread, each call would need the GIL.
        self._deadline = time.perf_counter() + HERE_BUDGET_S
        raw.set_progress_handler(self._late, PROGRESS_STEPS)
        try:
            return _run(raw, self.turn, operation, parameters)
        except sqlite3.OperationalError as error:
            if error.sqlite_errorcode != sqlite3.SQLITE_INTERRUPT:
                raise
            return None
        finally:
            raw.set_progress_handler(None, 0)

    def _end(self, end: Callable[[sqlite3.Connection, WriteTurn], None]) -> None:
        driver: aiosqlite.Connection = self._connection  # type: ignore[assignment]
        if driver._connection is None:  # closed: as the adapter, nothing to end
            return
        if not driver._connection.in_transaction and not self.turn.held:
            return  # sqlite3 would do nothing: no trip (the pool's reset after a read)
        try:
            if self._execute_mutex.locked():
                await_(driver._execute(end, driver._conn, self.turn))
            else:
                end(driver._connection, self.turn)
            if end is _commit and self.dbapi.checkpoint_due():
                await_(driver._execute(_checkpoint, driver._conn))
        except Exception as error:
            self._handle_exception(error)

    def commit(self) -> None:
        self._end(_commit)

    def rollback(self) -> None:
        self._end(_rollback)

    def close(self) -> None:
        try:
            super().close()
        finally:
            self.turn.give()

    def terminate(self) -> None:
        try:
            super().terminate()
        finally:
            self.turn.give()


class OneTripDBAPI(AsyncAdapt_aiosqlite_dbapi):
    """SQLAlchemy's aiosqlite module, handing out `OneTripConnection`s. An engine has a module
    of its own (`one_trip_dbapi`), and so its own write lock."""

    def __init__(self, aiosqlite: Any, sqlite: Any) -> None:
        super().__init__(aiosqlite, sqlite)
        self.write_lock = threading.Lock()
        self._commits = itertools.count(1)

    def checkpoint_due(self) -> bool:
        """Whether the commit just made is one that checkpoints the WAL (`CHECKPOINT_EVERY`)."""
        return next(self._commits) % CHECKPOINT_EVERY == 0

    def connect(self, *arg: Any, **kw: Any) -> OneTripConnection:
        # The adapter's own connect opens the aiosqlite connection (and daemonises its thread);
        # the connection it wraps it in is set aside for one of this module's.
        adapted = super().connect(*arg, **kw)
        return OneTripConnection(self, adapted._connection)


def one_trip_dbapi() -> OneTripDBAPI:
    """The module to give an `sqlite+aiosqlite` engine (`create_async_engine(module=...)`)."""
    return OneTripDBAPI(aiosqlite, sqlite3)


class _Lent(PoolProxiedConnection):
    """A sqlite3 connection lent to a SQLAlchemy `Connection` for one call on its thread: what
    the `Connection` asks of a pooled connection, with nothing given back to a pool when it
    closes (the connection stays the pool's, checked out by the caller of `in_one_trip`)."""

    __slots__ = ("_info", "_sqlite", "dbapi_connection", "driver_connection", "invalidated")

    def __init__(self, connection: sqlite3.Connection) -> None:
        self._sqlite = connection
        self.dbapi_connection = self.driver_connection = cast(Any, connection)
        self.invalidated = False
        self._info: dict[Any, Any] = {}

    def cursor(self, *args: Any, **kwargs: Any) -> Any:
        return self._sqlite.cursor(*args, **kwargs)

    def commit(self) -> None:
        self._sqlite.commit()

    def rollback(self) -> None:
        self._sqlite.rollback()

    @property
    def is_valid(self) -> bool:
        return not self.invalidated

    @property
    def is_detached(self) -> bool:
        return False

    @property
    def info(self) -> dict[Any, Any]:
        return self._info

    @property
    def record_info(self) -> dict[Any, Any]:
        return self._info

    def invalidate(self, e: BaseException | None = None, soft: bool = False) -> None:
        self.invalidated = True  # the pooled connection finds out on its own next statement

    def detach(self) -> None:
        pass

    def close(self) -> None:
        pass

    def _close_special(self, transaction_reset: bool = False) -> None:
        pass


def _work_on(
    engine: Engine, connection: sqlite3.Connection, turn: WriteTurn, work: Callable[[Connection], T]
) -> T:
    try:
        turn.take()
    except sqlite3.OperationalError as error:  # as a statement's would be: SQLAlchemy's
        raise OperationalError("(waiting for the write turn)", None, error) from error
    try:
        with Connection(engine, connection=_Lent(connection)) as lent, lent.begin():
            return work(lent)
    finally:
        _ended(connection, turn)


async def in_one_trip(connection: AsyncConnection, work: Callable[[Connection], T]) -> T:
    """Run `work` with a `Connection` on `connection`'s own sqlite3 connection, on its thread, in
    one trip and one transaction: committed if `work` returns, rolled back if it raises. The
    write turn is taken before it and given back after, on the thread. `connection` must hold
    no write of its own (its transaction would be this one's). `work` runs beside the event
    loop: it must touch nothing of the loop's, only the database."""
    fairy = await connection.get_raw_connection()
    adapted = fairy.dbapi_connection
    if not isinstance(adapted, OneTripConnection):
        raise TypeError(f"{type(adapted).__name__} is not an aiosqlite connection of this module")
    if adapted.turn.held:
        raise RuntimeError("the connection is in a write transaction of its own")
    driver: aiosqlite.Connection = adapted._connection
    context = contextvars.copy_context()  # the task's, for what the engine's events trace
    async with adapted._execute_mutex:
        return await driver._execute(
            context.run, _work_on, connection.sync_engine, driver._conn, adapted.turn, work
        )

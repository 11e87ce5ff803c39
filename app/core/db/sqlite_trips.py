"""SQLite through aiosqlite, each statement in one trip to the connection's thread.

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
aiosqlite's own function for running a call there.
"""

from __future__ import annotations

import collections
import sqlite3
from collections.abc import Sequence
from typing import Any

import aiosqlite
from sqlalchemy.connectors.asyncio import AsyncAdapt_dbapi_connection
from sqlalchemy.dialects.sqlite.aiosqlite import (
    AsyncAdapt_aiosqlite_connection,
    AsyncAdapt_aiosqlite_cursor,
    AsyncAdapt_aiosqlite_dbapi,
)
from sqlalchemy.util import EMPTY_DICT

_Outcome = tuple[Any, int, int | None, list[Any]]
"""What a statement leaves: its description, row count, last row id and rows."""


def _run(
    connection: sqlite3.Connection, operation: str, parameters: Sequence[Any] | None
) -> _Outcome:
    cursor = connection.cursor()
    try:
        cursor.execute(operation, () if parameters is None else parameters)
        description = cursor.description
        rows = cursor.fetchall() if description else []
        return description, cursor.rowcount, cursor.lastrowid, rows
    finally:
        cursor.close()


def _run_many(
    connection: sqlite3.Connection, operation: str, parameters: Sequence[Sequence[Any]]
) -> _Outcome:
    cursor = connection.cursor()
    try:
        cursor.executemany(operation, parameters)
        return cursor.description, cursor.rowcount, cursor.lastrowid, []
    finally:
        cursor.close()


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
        async with self._adapt_connection._execute_mutex:
            outcome: _Outcome = await connection._execute(
                call, connection._conn, operation, parameters
            )
        self._description, self._rowcount, self._lastrowid, rows = outcome
        self._rows = collections.deque(rows)

    async def _async_soft_close(self) -> None:
        """Nothing stays open on the thread: the cursor there closed with its statement."""

    def close(self) -> None:
        self._rows.clear()


class OneTripConnection(AsyncAdapt_aiosqlite_connection):
    __slots__ = ()
    _cursor_cls = OneTripCursor


class OneTripDBAPI(AsyncAdapt_aiosqlite_dbapi):
    """SQLAlchemy's aiosqlite module, handing out `OneTripConnection`s."""

    def connect(self, *arg: Any, **kw: Any) -> OneTripConnection:
        # The adapter's own connect opens the aiosqlite connection (and daemonises its thread);
        # the connection it wraps it in is set aside for one of this module's.
        adapted = super().connect(*arg, **kw)
        return OneTripConnection(self, adapted._connection)


def one_trip_dbapi() -> OneTripDBAPI:
    """The module to give an `sqlite+aiosqlite` engine (`create_async_engine(module=...)`)."""
    return OneTripDBAPI(aiosqlite, sqlite3)

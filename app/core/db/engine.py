"""The async engine and session factory, tuned per backend.

SQLite needs three things set on every connection to behave like a server database under a
web workload: foreign keys on (cascades depend on it), WAL (readers don't block the writer) and
a busy timeout (writers wait instead of failing).

PostgreSQL: a pooled connection the server closed while it sat in the pool (a restart, an
operator's `pg_terminate_backend`) is dropped when it is checked out and another is made
(`_closed_at_checkout`). asyncpg notices the server closing the socket as soon as the event
loop reads it, so asking asyncpg costs nothing; SQLAlchemy's `pool_pre_ping` instead sends
`BEGIN`, `;` and `ROLLBACK` at every checkout, three round trips that cost about 150 us of CPU
each time (measured: 840 against 690 us for a checkout and one statement), six to eight times
a turn. (Another async driver keeps `pool_pre_ping`.) A connection that dies while in use is
what `app.core.db.retry` is for.

A request's connection runs each statement alone on PostgreSQL (`statements_alone`, autocommit)
until the request asks for a transaction (`in_transactions`, an ORM session, `one_snapshot`):
authentication reads one row, a reader of a live turn one more, and in a transaction of their
own each would cost a `BEGIN` and a `ROLLBACK`, two round trips more than the read. (Under READ
COMMITTED a transaction gives a read nothing it doesn't get alone: each statement sees what was
committed when it began either way; what writes several rows is back in a transaction before it
writes.) The switch itself is the driver's, with no round trip.

A view read in several statements (a chat with its messages and tool calls) reads them in one
snapshot (`one_snapshot`): by default each statement sees what was committed when it began, so a
sweep committing between two of them would show a round still `ok` beside its call already
`cancelled`, a chat no state of the database ever held.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import CursorResult, make_url
from sqlalchemy.exc import DisconnectionError
from sqlalchemy.ext.asyncio import (
    AsyncConnection,
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)
from sqlalchemy.sql.dml import UpdateBase

from app.core.db.sqlite_trips import BUSY_TIMEOUT_MS, OneTripConnection, one_trip_dbapi
from app.core.db.types import read_json


def sqlite_file(url: str) -> Path | None:
    """The file of a file-backed SQLite database URL, else None."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return None
    if parsed.database.startswith("file:"):
        return None  # a URI filename: whoever wrote it chose how it is opened
    return Path(parsed.database)


def ensure_sqlite_dir(url: str) -> None:
    """Create a file-backed SQLite database's folder (0700) and file (0600), so a fresh
    checkout just starts and nobody else on the machine can read it (SQLite gives its WAL
    and shared-memory files the database file's permissions)."""
    path = sqlite_file(url)
    if path is None:
        return
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    with contextlib.suppress(FileExistsError):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    if isinstance(dbapi_connection, OneTripConnection):  # its checkpoints run on a thread
        cursor.execute("PRAGMA wal_autocheckpoint=0")
    cursor.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
    cursor.close()


POOL_SIZE = 30
"""PostgreSQL connections a worker keeps, opened as it needs them; no overflow beyond them. A
burst of turns or of readers needs more than 10 at once: a pool of 10 with 20 overflow closed
each overflow connection as it came back and opened another for the next request (244
connections opened in one `bench/live.py --rounds 1`, against 68 with this pool; each costs a
server process, and 2.5-2.8 ms of the worker's CPU with its first statement against 0.3-0.6 ms
for a pooled one). The ceiling of 30 at once stays where it was."""

SQLITE_POOL_SIZE = 30
"""SQLite connections a worker keeps (each with an aiosqlite thread, asleep while unused), with
no overflow. SQLAlchemy's default, 5 with 10 overflow, closed each overflow connection as it
came back, with its thread: the two servers of `bench/turn_overhead.py --parts d` (20 turns at
once) opened 37 and 67 connections, against 22 and 24 with this pool, and a 50-token turn cost
34.5-35.5 ms of CPU against 31.5-33.5 (alternated runs)."""


def create_engine(url: str, **kwargs: Any) -> AsyncEngine:
    ensure_sqlite_dir(url)
    kwargs.setdefault("json_deserializer", read_json)
    if make_url(url).get_backend_name() == "sqlite":
        if make_url(url).get_driver_name() == "aiosqlite":
            kwargs.setdefault("module", one_trip_dbapi())  # a statement a trip (see there)
            # Its statements run on the event loop's thread too, one at a time (see there).
            kwargs["connect_args"] = {"check_same_thread": False, **kwargs.get("connect_args", {})}
            if sqlite_file(url) is not None:
                kwargs.setdefault("pool_size", SQLITE_POOL_SIZE)
                kwargs.setdefault("max_overflow", 0)
        engine = create_async_engine(url, **kwargs)
        event.listen(engine.sync_engine, "connect", _sqlite_pragmas)
        return engine
    kwargs.setdefault("pool_size", POOL_SIZE)
    kwargs.setdefault("max_overflow", 0)
    asks_asyncpg = make_url(url).get_driver_name() == "asyncpg"
    if not asks_asyncpg:
        kwargs.setdefault("pool_pre_ping", True)  # another driver: the generic check
    engine = create_async_engine(url, **kwargs)
    if asks_asyncpg and not kwargs.get("pool_pre_ping"):
        event.listen(engine.sync_engine, "checkout", _closed_at_checkout)
    return engine


def _closed_at_checkout(dbapi_connection: Any, _record: Any, _proxy: Any) -> None:
    """Drop a pooled connection the server has closed: the pool makes another (a
    `DisconnectionError` raised here is how SQLAlchemy asks it to)."""
    if dbapi_connection.driver_connection.is_closed():
        raise DisconnectionError("the database closed this pooled connection")


def session_factory(engine: AsyncEngine) -> async_sessionmaker[AsyncSession]:
    return async_sessionmaker(engine, expire_on_commit=False)


def alone_factory(engine: AsyncEngine) -> async_sessionmaker[AsyncSession]:
    """Sessions whose statements each run alone on PostgreSQL (as `statements_alone`; the pool
    is the engine's), for reads that need no common snapshot and for a write of one statement:
    a turn's history is a read or a few, and a round's end one update, which a transaction would
    wrap in a `BEGIN` and a `COMMIT` that give them nothing under READ COMMITTED (two round
    trips, measured at 0.3 ms of the worker's CPU each). What must see one snapshot asks for it
    (`one_snapshot`); what writes more than one statement uses `session_factory`'s sessions."""
    if engine.dialect.name != "postgresql":
        return session_factory(engine)
    return session_factory(engine.execution_options(isolation_level="AUTOCOMMIT"))


def dialect_of(sessions: async_sessionmaker[AsyncSession]) -> str:
    """The kind of database `sessions` talk to (`postgresql`, `sqlite`)."""
    bind: AsyncEngine = sessions.kw["bind"]
    return bind.dialect.name


async def rows_changed(
    db: AsyncSession, statement: UpdateBase, values: Mapping[str, Any] | None = None
) -> int:
    """Run an UPDATE or DELETE (without RETURNING), with `values` for its bound parameters,
    and tell how many rows it changed."""
    result = await db.execute(statement, values)
    if not isinstance(result, CursorResult):  # what a statement without RETURNING answers
        raise TypeError(f"{type(result).__name__} tells no row count")
    return result.rowcount


async def statements_alone(connection: AsyncConnection) -> None:
    """PostgreSQL: each statement on `connection` commits by itself, with no `BEGIN` or
    `ROLLBACK` around it, until `in_transactions` (the pool restores the connection when it
    goes back). SQLite opens no transaction for a read anyway: nothing to do there."""
    if connection.dialect.name == "postgresql":
        await connection.execution_options(isolation_level="AUTOCOMMIT")


async def in_transactions(connection: AsyncConnection) -> None:
    """End what authentication read on `connection`: the statements that follow share a
    transaction again, which begins with the first of them."""
    if connection.in_transaction():
        await connection.rollback()
    if connection.dialect.name == "postgresql":
        await connection.execution_options(
            isolation_level=connection.dialect.default_isolation_level
        )


@contextlib.asynccontextmanager
async def session_on(connection: AsyncConnection) -> AsyncIterator[AsyncSession]:
    """An ORM session on the request's `connection`, in a transaction of its own
    (`in_transactions`): a route's session, or what a route opens once it knows it needs one."""
    await in_transactions(connection)
    async with AsyncSession(bind=connection, expire_on_commit=False) as session:
        yield session


async def one_snapshot(connection: AsyncConnection) -> None:
    """Make the reads that follow on `connection` see one snapshot of the database, until its
    transaction ends (the pool resets the connection when it goes back).

    PostgreSQL: a read-only REPEATABLE READ transaction. SQLite (WAL): an explicit `BEGIN`,
    since Python's sqlite3 opens none for a SELECT and each would see the latest commit.
    """
    if connection.in_transaction():
        await connection.rollback()  # what authentication read
    if connection.dialect.name == "sqlite":
        await connection.exec_driver_sql("BEGIN")
    else:
        await connection.execution_options(
            isolation_level="REPEATABLE READ", postgresql_readonly=True
        )

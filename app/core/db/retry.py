"""Transactions that outlive a dropped database connection.

A turn's writes must not be lost to a blip: PostgreSQL restarting, a proxy or an operator
terminating connections (`pg_terminate_backend`), SQLite busy beyond its timeout. `transaction`
runs a unit of work in a session of its own and, when the connection dropped under it, runs it
again on a fresh one (the pool drops the dead connection, and does not hand out one the server
closed while it was pooled: `app.core.db.engine`), a bounded number of times with a growing
pause (about six seconds in all). What is not a dropped connection (a constraint, a bug) is
raised at once.

A retried unit must be idempotent, since a commit that failed on a dropped connection may have
landed. Updates by id are. An insert is made idempotent by `insert_once`: the ids an attempt
was given are remembered, and the next attempt first asks whether the first of those rows exists
with the same chat and time (an id is never handed out twice on PostgreSQL; SQLite may hand a
rolled-back id to another row, which the chat and time tell apart).
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import traceback
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Final, TypeVar

from sqlalchemy import select
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.core.db.base import Base

log = logging.getLogger("hearth.db")

T = TypeVar("T")
R = TypeVar("R", bound=Base)

PAUSES = (0.05, 0.1, 0.2, 0.4, 0.8, 1.6, 3.0)
"""The pause before each new attempt: eight attempts over about six seconds."""


UNAVAILABLE_STATES: Final = ("08", "53", "57P01", "57P02", "57P03")
"""PostgreSQL's SQLSTATEs for a server that cannot take the work now, whatever the work: a
connection exception, insufficient resources (`too many connections`), a server shutting down,
crashed or still starting."""
SQLITE_UNAVAILABLE: Final = (
    "database is locked",
    "database table is locked",
    "database is busy",
    "unable to open database file",
    "disk i/o error",
)
"""The starts of SQLite's messages for a file it cannot use now. SQLite raises the same
`OperationalError` for a missing table or a syntax error, which are the work's fault."""
DRIVERS: Final = ("sqlalchemy.", "asyncpg.", "aiosqlite.")


def transient(error: BaseException) -> bool:
    """Whether `error` is the connection failing rather than the work: worth a new attempt."""
    if isinstance(error, DBAPIError):
        if error.connection_invalidated:
            return True
        if isinstance(error.orig, sqlite3.Error):
            return str(error.orig).lower().startswith(SQLITE_UNAVAILABLE)
        state = str(getattr(error.orig, "sqlstate", None) or "")
        return isinstance(error, OperationalError) or state.startswith(UNAVAILABLE_STATES)
    return isinstance(error, ConnectionError | TimeoutError)


def database_unavailable(error: BaseException) -> bool:
    """Whether `error` is the database refusing or losing the connection (down, restarting, out
    of connections, SQLite busy beyond its timeout) rather than a fault of the request or of
    hearth: a request that meets it is answered 503, to be tried again, not 500. A connection
    error counts only when the driver raised it, not a provider's or an MCP server's."""
    if isinstance(error, DBAPIError):
        return transient(error)
    return transient(error) and any(
        str(frame.f_globals.get("__name__", "")).startswith(DRIVERS)
        for frame, _ in traceback.walk_tb(error.__traceback__)
    )


async def transaction(
    sessions: async_sessionmaker[AsyncSession],
    work: Callable[[AsyncSession], Awaitable[T]],
    *,
    what: str = "a write",
) -> T:
    """Run `work` and commit, again on a fresh connection while the connection is what fails."""
    for pause in (*PAUSES, None):
        try:
            async with sessions() as db:
                result = await work(db)
                await db.commit()
                return result
        except Exception as exc:
            if pause is None or not transient(exc):
                raise
            log.warning("%s failed on a dropped connection; trying again: %s", what, exc)
        await asyncio.sleep(pause)
    raise AssertionError("unreachable")


async def insert_once(
    sessions: async_sessionmaker[AsyncSession],
    make: Callable[[], Sequence[R]],
    *,
    what: str = "an insert",
    then: Callable[[AsyncSession, list[R]], Awaitable[None]] | None = None,
) -> list[R]:
    """Insert the rows `make` builds, in one transaction, exactly once however often it is tried.

    Returns the rows as inserted (ids set). `make` is called for each attempt, since the rows of
    a failed one are no longer usable. `then` runs in the same transaction once the rows have
    their ids (what it writes lands with them, or not at all).
    """
    tried: list[R] = []
    """The rows of the last attempt that reached its commit."""

    async def attempt(db: AsyncSession) -> list[R]:
        nonlocal tried
        if tried and await _landed(db, tried[0]):
            return tried
        rows = list(make())
        db.add_all(rows)
        await db.flush()
        if then is not None:
            await then(db, rows)
        tried = rows
        return rows

    return await transaction(sessions, attempt, what=what)


IDENTIFYING = ("chat_id", "created_at")


async def _landed(db: AsyncSession, row: Base) -> bool:
    mapper: Any = row.__mapper__
    [key] = mapper.primary_key
    query = select(key).where(key == getattr(row, key.key))
    for name in IDENTIFYING:
        if name in mapper.columns:
            query = query.where(mapper.columns[name] == getattr(row, name))
    return await db.scalar(query) is not None

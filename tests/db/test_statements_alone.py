"""`statements_alone`, `in_transactions` and the `alone` sessions: transactions where they count.

A request's authentication read runs alone on PostgreSQL (no `BEGIN`/`ROLLBACK` around it), and
so do a turn's history reads and its one-statement writes; whatever writes afterwards on the
same connection, or on the same pooled connection later, must be in a transaction again, or a
write of several statements could land in part. `now()` tells the two apart: within a
transaction it is the transaction's start, alone it is each statement's own."""

from __future__ import annotations

import asyncio
from datetime import datetime

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession

from app.core.db.engine import create_engine, in_transactions, statements_alone
from app.services import Services


async def _now_twice(db: AsyncConnection | AsyncSession) -> tuple[datetime, datetime]:
    first = await db.scalar(text("SELECT now()"))
    await asyncio.sleep(0.01)
    second = await db.scalar(text("SELECT now()"))
    assert isinstance(first, datetime) and isinstance(second, datetime)
    return first, second


@pytest.fixture
def postgresql(backend: str) -> None:
    if backend != "postgresql":
        pytest.skip("SQLite opens no transaction for a read: nothing is left out there")


@pytest.mark.usefixtures("postgresql")
async def test_statements_alone_run_each_in_their_own_transaction(services: Services) -> None:
    async with services.engine.connect() as connection:
        await statements_alone(connection)
        first, second = await _now_twice(connection)
        assert second > first


@pytest.mark.usefixtures("postgresql")
async def test_in_transactions_puts_the_statements_that_follow_in_one_again(
    services: Services,
) -> None:
    async with services.engine.connect() as connection:
        await statements_alone(connection)
        await connection.execute(text("SELECT 1"))  # as authentication reads
        await in_transactions(connection)
        first, second = await _now_twice(connection)
        assert second == first
        await connection.rollback()


async def test_a_write_after_in_transactions_is_undone_by_its_rollback(
    services: Services,
) -> None:
    async with services.engine.connect() as setup:
        await setup.execute(text("CREATE TABLE alone_probe (n INTEGER)"))
        await setup.commit()
    try:
        async with services.engine.connect() as connection:
            await statements_alone(connection)
            await connection.execute(text("SELECT 1"))
            await in_transactions(connection)
            await connection.execute(text("INSERT INTO alone_probe VALUES (1)"))
            await connection.rollback()
        async with services.engine.connect() as reader:
            assert await reader.scalar(text("SELECT count(*) FROM alone_probe")) == 0
    finally:
        async with services.engine.connect() as cleanup:
            await cleanup.execute(text("DROP TABLE alone_probe"))
            await cleanup.commit()


@pytest.mark.usefixtures("postgresql")
async def test_a_connection_back_from_a_request_is_in_transactions_for_the_next(
    services: Services,
) -> None:
    """The pool restores the connection: the next user of the same one has transactions."""
    engine = create_engine(services.settings.database_url, pool_size=1, max_overflow=0)
    try:
        async with engine.connect() as connection:
            await statements_alone(connection)
            pid = await connection.scalar(text("SELECT pg_backend_pid()"))
        async with engine.connect() as connection:
            assert await connection.scalar(text("SELECT pg_backend_pid()")) == pid
            first, second = await _now_twice(connection)
            assert second == first
            await connection.rollback()
    finally:
        await engine.dispose()


@pytest.mark.usefixtures("postgresql")
async def test_alone_sessions_run_each_statement_alone_and_the_others_do_not(
    services: Services,
) -> None:
    async with services.alone() as db:
        first, second = await _now_twice(db)
        assert second > first
    async with services.sessions() as db:
        first, second = await _now_twice(db)
        assert second == first

"""SQLite statements in one trip each to aiosqlite's thread, with the adapter's results."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.db.engine import create_engine
from app.core.db.sqlite_trips import OneTripConnection


@pytest.fixture
async def engine(tmp_path: Path) -> AsyncIterator[AsyncEngine]:
    made = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'trips.db'}")
    async with made.begin() as connection:
        await connection.execute(
            text("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT UNIQUE, n INTEGER DEFAULT 0)")
        )
    yield made
    await made.dispose()


async def test_every_statement_is_one_trip(engine: AsyncEngine, trips: list[str]) -> None:
    async with engine.connect() as connection:
        raw = await connection.get_raw_connection()
        assert isinstance(raw.dbapi_connection, OneTripConnection)
        trips.clear()
        inserted = await connection.execute(text("INSERT INTO t (v) VALUES ('a') RETURNING id"))
        assert inserted.scalar_one() == 1
        assert len(trips) == 1
        selected = await connection.execute(text("SELECT id, v, n FROM t ORDER BY id"))
        assert selected.all() == [(1, "a", 0)]
        updated = await connection.execute(text("UPDATE t SET n = n + 1 WHERE v = 'a'"))
        assert updated.rowcount == 1
        assert len(trips) == 3
        await connection.commit()
        assert len(trips) == 4  # the commit
        await connection.execute(text("SELECT 1"))
        await connection.rollback()
        await connection.commit()
        assert len(trips) == 5  # with nothing to end, neither went to the thread


async def test_results_match_what_the_adapter_gave(engine: AsyncEngine) -> None:
    async with engine.begin() as connection:
        plain = await connection.execute(text("INSERT INTO t (v) VALUES ('x')"))
        assert plain.lastrowid == 1
        many = await connection.execute(
            text("INSERT INTO t (v, n) VALUES (:v, :n)"),
            [{"v": "y", "n": 2}, {"v": "z", "n": 3}],
        )
        assert many.rowcount == 2
        batches = await connection.execute(text("SELECT v FROM t ORDER BY id"))
        assert batches.fetchmany() == [("x",)] and batches.fetchmany(5) == [("y",), ("z",)]
        nothing = await connection.execute(text("UPDATE t SET n = 9 WHERE v = 'none'"))
        assert nothing.rowcount == 0
        deleted = await connection.execute(text("DELETE FROM t WHERE n >= 2 RETURNING v"))
        assert sorted(deleted.scalars().all()) == ["y", "z"]
        empty = await connection.execute(text("SELECT v FROM t WHERE n = 99"))
        assert empty.all() == []
        assert (await connection.execute(text("SELECT count(*) FROM t"))).scalar_one() == 1
        # Rows read as a stream (a server-side cursor) keep the adapter's own way.
        streamed = await connection.stream(text("SELECT v FROM t"))
        assert [row.v async for row in streamed] == ["x"]


async def test_errors_are_sqlalchemys_and_leave_the_connection_usable(
    engine: AsyncEngine,
) -> None:
    async with engine.connect() as connection:
        await connection.execute(text("INSERT INTO t (v) VALUES ('a')"))
        with pytest.raises(IntegrityError, match="UNIQUE"):
            await connection.execute(text("INSERT INTO t (v) VALUES ('a')"))
        await connection.rollback()
        with pytest.raises(OperationalError, match="no such table"):
            await connection.execute(text("SELECT * FROM missing"))
        await connection.rollback()
        assert (await connection.execute(text("SELECT count(*) FROM t"))).scalar_one() == 0
        await connection.execute(text("INSERT INTO t (v) VALUES ('b')"))
        await connection.commit()
    async with engine.connect() as connection:
        assert (await connection.execute(text("SELECT v FROM t"))).scalars().all() == ["b"]


async def test_the_pragmas_hold_and_a_writer_of_another_engine_waits(
    engine: AsyncEngine,
) -> None:
    """Another engine (as another process would) meets SQLite's own lock and busy timeout."""
    other = create_engine(str(engine.url))
    async with engine.connect() as first, other.connect() as second:
        assert (await first.execute(text("PRAGMA journal_mode"))).scalar_one() == "wal"
        assert (await first.execute(text("PRAGMA foreign_keys"))).scalar_one() == 1
        await first.execute(text("INSERT INTO t (v) VALUES ('held')"))  # the write lock

        async def write() -> None:
            await second.execute(text("INSERT INTO t (v) VALUES ('waited')"))
            await second.commit()

        waiting = asyncio.create_task(write())
        await asyncio.sleep(0.2)
        assert not waiting.done()  # the busy timeout makes it wait, not fail
        await first.commit()
        await asyncio.wait_for(waiting, 10)
        rows = await first.execute(text("SELECT v FROM t ORDER BY id"))
        assert rows.scalars().all() == ["held", "waited"]
    await other.dispose()


async def test_concurrent_statements_on_one_engine(engine: AsyncEngine) -> None:
    async def one(index: int) -> int:
        async with engine.begin() as connection:
            values = {"v": f"v{index}", "n": index}
            await connection.execute(text("INSERT INTO t (v, n) VALUES (:v, :n)"), values)
            found = await connection.execute(text("SELECT n FROM t WHERE v = :v"), values)
            return int(found.scalar_one())

    assert await asyncio.gather(*(one(i) for i in range(40))) == list(range(40))

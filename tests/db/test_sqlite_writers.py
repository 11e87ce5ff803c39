"""SQLite writers of one engine take turns on their threads, and a transaction can be one trip."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sqlalchemy import Connection, event, text
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from app.core.db import sqlite_trips
from app.core.db.engine import create_engine
from app.core.db.retry import transient
from app.core.db.sqlite_trips import OneTripConnection, in_one_trip, may_write


@pytest.fixture
async def engine(tmp_path: Path) -> AsyncIterator[AsyncEngine]:
    made = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'writers.db'}")
    async with made.begin() as connection:
        await connection.execute(text("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT UNIQUE)"))
    yield made
    await made.dispose()


async def holds(connection: AsyncConnection) -> bool:
    """Whether `connection` holds its database's write turn."""
    raw = await connection.get_raw_connection()
    adapted = raw.dbapi_connection
    assert isinstance(adapted, OneTripConnection)
    return adapted.turn.held


async def values(engine: AsyncEngine) -> list[str]:
    async with engine.connect() as connection:
        return list((await connection.execute(text("SELECT v FROM t ORDER BY id"))).scalars())


def test_what_may_write() -> None:
    for read in (
        "SELECT 1",
        "  select v FROM t",
        "PRAGMA journal_mode",
        "BEGIN",
        "COMMIT",
        "ROLLBACK TO SAVEPOINT sa_1",
        "SAVEPOINT sa_1",
        "WITH x AS (SELECT 1) SELECT * FROM x",
        "EXPLAIN QUERY PLAN SELECT 1",
    ):
        assert not may_write(read), read
    for write in (
        "INSERT INTO t (v) VALUES (?)",
        "UPDATE t SET v = ?",
        "delete from t",
        "REPLACE INTO t (v) VALUES (?)",
        "CREATE TABLE u (id INTEGER)",
        "DROP TABLE u",
        "WITH x AS (SELECT 1) UPDATE t SET v = 'a'",
        "VACUUM",
        "",
    ):
        assert may_write(write), write


async def test_a_writer_waits_for_the_one_before_it_and_reads_never_wait(
    engine: AsyncEngine,
) -> None:
    async with engine.connect() as first, engine.connect() as second:
        await first.execute(text("SELECT count(*) FROM t"))
        assert not await holds(first)  # a read takes no turn
        await first.execute(text("INSERT INTO t (v) VALUES ('first')"))
        assert await holds(first)

        async def write() -> None:
            await second.execute(text("INSERT INTO t (v) VALUES ('second')"))
            assert await holds(second)
            await second.commit()

        waiting = asyncio.create_task(write())
        # A reader goes on meanwhile, on a third connection, seeing what was committed.
        assert await values(engine) == []
        await asyncio.sleep(0.2)
        assert not waiting.done()
        await first.commit()
        assert not await holds(first)
        await asyncio.wait_for(waiting, 5)
        assert not await holds(second)
    assert await values(engine) == ["first", "second"]


async def test_the_turn_is_given_back_by_rollback_close_and_a_statement_alone(
    engine: AsyncEngine,
) -> None:
    async with engine.connect() as connection:
        await connection.execute(text("INSERT INTO t (v) VALUES ('a')"))
        await connection.rollback()
        assert not await holds(connection)
        await connection.execute(text("INSERT INTO t (v) VALUES ('b')"))
        await connection.commit()
        # A failed write keeps the turn until its transaction ends.
        await connection.execute(text("INSERT INTO t (v) VALUES ('c')"))
        with pytest.raises(IntegrityError):
            await connection.execute(text("INSERT INTO t (v) VALUES ('b')"))
        assert await holds(connection)
        await connection.rollback()
        assert not await holds(connection)
        # A statement outside any transaction (DDL is not wrapped in one) gives it back at once.
        await connection.execute(text("CREATE TABLE u (id INTEGER)"))
        assert not await holds(connection)
    # A connection left holding it gives it back when the pool rolls it back...
    async with engine.connect() as connection:
        await connection.execute(text("INSERT INTO t (v) VALUES ('left')"))
    async with asyncio.timeout(5), engine.begin() as connection:
        await connection.execute(text("INSERT INTO t (v) VALUES ('next')"))
    # ...and when it is closed for good.
    async with engine.connect() as connection:
        await connection.execute(text("INSERT INTO t (v) VALUES ('closed')"))
        await connection.invalidate()
    async with asyncio.timeout(5), engine.begin() as connection:
        await connection.execute(text("INSERT INTO t (v) VALUES ('after')"))
    assert await values(engine) == ["b", "next", "after"]


async def test_a_writer_waits_no_longer_than_sqlite_would(
    engine: AsyncEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_trips, "BUSY_TIMEOUT_S", 0.3)
    async with engine.connect() as first, engine.connect() as second:
        await first.execute(text("INSERT INTO t (v) VALUES ('held')"))
        with pytest.raises(OperationalError, match="database is locked"):
            await second.execute(text("INSERT INTO t (v) VALUES ('late')"))
        assert not await holds(second)
        await second.rollback()
        await first.commit()
        await second.execute(text("INSERT INTO t (v) VALUES ('now')"))
        await second.commit()
        # A transaction in one trip waits the same, and fails the same way.
        await first.execute(text("INSERT INTO t (v) VALUES ('held again')"))
        with pytest.raises(OperationalError, match="database is locked") as failed:
            await in_one_trip(second, lambda lent: lent.execute(text("DELETE FROM t")))
        assert transient(failed.value)  # tried again, or answered 503, as SQLite's own
        await first.commit()
    assert await values(engine) == ["held", "now", "held again"]


async def test_a_transaction_in_one_trip(engine: AsyncEngine, trips: list[str]) -> None:
    seen: list[str] = []
    event.listen(engine.sync_engine, "before_cursor_execute", lambda *args: seen.append(args[2]))

    def work(lent: Connection) -> tuple[int, int]:
        first = lent.execute(text("INSERT INTO t (v) VALUES ('a') RETURNING id")).scalar_one()
        lent.execute(text("INSERT INTO t (v) VALUES (:v)"), {"v": f"after {first}"})
        return first, lent.execute(text("SELECT count(*) FROM t")).scalar_one()

    async with engine.connect() as connection:
        await connection.execute(text("SELECT 1"))  # what authentication would read
        trips.clear()
        assert await in_one_trip(connection, work) == (1, 2)
        assert len(trips) == 1  # statements, commit and all
        assert seen[-3:] == [  # the engine's own events saw them
            "INSERT INTO t (v) VALUES ('a') RETURNING id",
            "INSERT INTO t (v) VALUES (?)",
            "SELECT count(*) FROM t",
        ]
        assert not await holds(connection)
    assert await values(engine) == ["a", "after 1"]


async def test_a_failed_one_trip_writes_nothing_and_gives_the_turn_back(
    engine: AsyncEngine,
) -> None:
    def work(lent: Connection) -> None:
        lent.execute(text("INSERT INTO t (v) VALUES ('kept?')"))
        lent.execute(text("INSERT INTO t (v) VALUES ('kept?')"))

    async with engine.connect() as connection:
        with pytest.raises(IntegrityError, match="UNIQUE"):
            await in_one_trip(connection, work)
        assert not await holds(connection)
        await connection.execute(text("INSERT INTO t (v) VALUES ('then')"))
        await connection.commit()
    assert await values(engine) == ["then"]


async def test_one_trip_takes_its_turn_and_refuses_a_connection_mid_write(
    engine: AsyncEngine,
) -> None:
    async with engine.connect() as first, engine.connect() as second:
        await first.execute(text("INSERT INTO t (v) VALUES ('first')"))
        with pytest.raises(RuntimeError, match="write transaction of its own"):
            await in_one_trip(first, lambda lent: None)
        waiting = asyncio.create_task(
            in_one_trip(second, lambda lent: lent.execute(text("INSERT INTO t (v) VALUES ('2')")))
        )
        await asyncio.sleep(0.2)
        assert not waiting.done()
        await first.commit()
        await asyncio.wait_for(waiting, 5)
    assert await values(engine) == ["first", "2"]


async def test_many_one_trips_and_writers_at_once(engine: AsyncEngine) -> None:
    insert = text("INSERT INTO t (v) VALUES (:v)")

    async def trip(index: int) -> None:
        async with engine.connect() as connection:
            await in_one_trip(connection, lambda lent: lent.execute(insert, {"v": f"t{index}"}))

    async def steps(index: int) -> None:
        async with engine.begin() as connection:
            await connection.execute(insert, {"v": f"s{index}"})
            await connection.execute(text("SELECT count(*) FROM t"))

    await asyncio.gather(*(trip(i) for i in range(30)), *(steps(i) for i in range(30)))
    assert sorted(await values(engine)) == sorted(
        [f"t{i}" for i in range(30)] + [f"s{i}" for i in range(30)]
    )

"""SQLite statements on the event loop's thread, or in one trip each to aiosqlite's thread, with
the adapter's results."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.db import sqlite_trips
from app.core.db.engine import create_engine
from app.core.db.sqlite_trips import HERE_BUDGET_S, OneTripConnection


@pytest.fixture
async def engine(tmp_path: Path) -> AsyncIterator[AsyncEngine]:
    made = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'trips.db'}")
    async with made.begin() as connection:
        await connection.execute(
            text("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT UNIQUE, n INTEGER DEFAULT 0)")
        )
    yield made
    await made.dispose()


async def test_a_statement_runs_here_or_is_one_trip(engine: AsyncEngine, trips: list[str]) -> None:
    """With nothing in the way, statements and commits run on the event loop's thread; a write
    while another connection holds the write turn is one trip, and waits there."""
    async with engine.connect() as connection, engine.connect() as other:
        raw = await connection.get_raw_connection()
        assert isinstance(raw.dbapi_connection, OneTripConnection)
        trips.clear()
        inserted = await connection.execute(text("INSERT INTO t (v) VALUES ('a') RETURNING id"))
        assert inserted.scalar_one() == 1
        selected = await connection.execute(text("SELECT id, v, n FROM t ORDER BY id"))
        assert selected.all() == [(1, "a", 0)]
        updated = await connection.execute(text("UPDATE t SET n = n + 1 WHERE v = 'a'"))
        assert updated.rowcount == 1
        await connection.commit()
        await connection.execute(text("SELECT 1"))
        await connection.rollback()
        assert trips == []

        await other.execute(text("INSERT INTO t (v) VALUES ('b')"))  # holds the turn
        waiting = asyncio.create_task(
            connection.execute(text("UPDATE t SET n = n + 1 WHERE v = 'a'"))
        )
        await asyncio.sleep(0.1)
        assert trips == ["_run"] and not waiting.done()
        # A read goes on here meanwhile, seeing what was committed.
        assert (await other.execute(text("SELECT count(*) FROM t"))).scalar_one() == 2
        await other.commit()
        assert (await asyncio.wait_for(waiting, 5)).rowcount == 1
        await connection.commit()
        assert trips == ["_run"]  # its commit has nothing to wait for: here
    async with engine.connect() as connection:
        rows = await connection.execute(text("SELECT v, n FROM t ORDER BY id"))
        assert rows.all() == [("a", 2), ("b", 0)]


LONG_READ = (
    "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 2000000) "
    "SELECT count(*), sum(x) FROM c"
)


async def test_a_long_read_is_stopped_here_and_finished_on_the_thread(
    engine: AsyncEngine, trips: list[str]
) -> None:
    """A read past its budget on the loop's thread gives the loop back at once and runs again
    on the connection's thread, with the same answer."""
    gaps: list[float] = []

    async def ticking() -> None:
        last = time.perf_counter()
        while True:
            await asyncio.sleep(0.001)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    ticker = asyncio.create_task(ticking())
    try:
        await asyncio.sleep(0.01)
        async with engine.connect() as connection:
            trips.clear()
            started = time.perf_counter()
            counted = (await connection.execute(text(LONG_READ))).one()
            took = time.perf_counter() - started
    finally:
        ticker.cancel()
    assert tuple(counted) == (2_000_000, 2_000_000 * 2_000_001 // 2)
    assert trips == ["_run"]
    assert took > 20 * HERE_BUDGET_S  # long enough that holding the loop would show
    assert max(gaps) < took / 2  # the loop went on while it ran


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
    engine: AsyncEngine, trips: list[str]
) -> None:
    """Another engine (as another process would) meets SQLite's own lock and busy timeout, on
    its connection's thread: the event loop goes on meanwhile."""
    other = create_engine(str(engine.url))
    async with engine.connect() as first, other.connect() as second:
        assert (await first.execute(text("PRAGMA journal_mode"))).scalar_one() == "wal"
        assert (await first.execute(text("PRAGMA foreign_keys"))).scalar_one() == 1
        await first.execute(text("INSERT INTO t (v) VALUES ('held')"))  # the write lock

        async def write() -> None:
            await second.execute(text("INSERT INTO t (v) VALUES ('waited')"))
            await second.commit()

        trips.clear()
        waiting = asyncio.create_task(write())
        await asyncio.sleep(0.2)
        assert not waiting.done()  # the busy timeout makes it wait, not fail
        assert trips == ["_run"]  # tried here without waiting, then sent to the thread
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


async def test_the_wal_is_checkpointed_on_the_thread_every_so_many_commits(
    engine: AsyncEngine, trips: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """SQLite's own checkpoints are off (they would run in a commit on the loop's thread); every
    `CHECKPOINT_EVERY`th commit of the engine is followed by one on the connection's thread."""
    monkeypatch.setattr(sqlite_trips, "CHECKPOINT_EVERY", 5)
    async with engine.connect() as connection:
        setting = await connection.execute(text("PRAGMA wal_autocheckpoint"))
        assert setting.scalar_one() == 0
        trips.clear()
        for index in range(12):
            await connection.execute(text("INSERT INTO t (v) VALUES (:v)"), {"v": f"c{index}"})
            await connection.commit()
        assert trips == ["_checkpoint"] * 2  # after the 5th and the 10th
        wal = await connection.execute(text("PRAGMA wal_checkpoint(PASSIVE)"))
        busy, frames, moved = wal.one()
        assert busy == 0 and moved == frames  # nothing left behind


async def test_a_write_in_a_transaction_a_read_began_goes_to_the_thread(
    engine: AsyncEngine, trips: list[str]
) -> None:
    """A savepoint opens a transaction without a write: the first write in it may wait for
    SQLite's lock, so it is the thread's."""
    async with engine.connect() as connection:
        trips.clear()
        await connection.execute(text("SAVEPOINT s"))
        await connection.execute(text("INSERT INTO t (v) VALUES ('s')"))
        assert trips == ["_run"]
        await connection.execute(text("RELEASE s"))
        await connection.commit()
        assert not (await connection.get_raw_connection()).dbapi_connection.turn.held
    async with engine.connect() as connection:
        assert (await connection.execute(text("SELECT v FROM t"))).scalars().all() == ["s"]

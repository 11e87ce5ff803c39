"""A pooled PostgreSQL connection the server closed is not handed out again.

hearth checks a connection at checkout by asking asyncpg whether the server closed it, instead
of a round trip to the server (`app.core.db.engine`). These tests close pooled connections from
the server's side, as a restart or an operator's `pg_terminate_backend` does, and check that the
next use of the pool, and a request through the app, get a working connection."""

from __future__ import annotations

from typing import Any

import asyncpg  # type: ignore[import-untyped]
import pytest
from sqlalchemy import event, text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from app.core.db.engine import create_engine
from app.services import Services
from tests.support import Client, wait_until


@pytest.fixture(autouse=True)
def _postgresql_only(backend: str) -> None:
    if backend != "postgresql":
        pytest.skip("an SQLite file has no server to close its connections")


class Pooled:
    """The asyncpg connections waiting in an engine's pool, told by the pool's events."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self.waiting: dict[int, asyncpg.Connection] = {}
        event.listen(engine.sync_engine, "checkin", self._checkin)
        event.listen(engine.sync_engine, "checkout", self._checkout)

    def _checkin(self, dbapi_connection: Any, _record: Any) -> None:
        if dbapi_connection is not None:
            self.waiting[id(dbapi_connection)] = dbapi_connection.driver_connection

    def _checkout(self, dbapi_connection: Any, _record: Any, _proxy: Any) -> None:
        self.waiting.pop(id(dbapi_connection), None)

    def close(self) -> None:
        event.remove(self.engine.sync_engine, "checkin", self._checkin)
        event.remove(self.engine.sync_engine, "checkout", self._checkout)


async def _terminate(services: Services, connections: list[asyncpg.Connection]) -> None:
    """Close `connections` from the server's side, and wait until asyncpg has noticed."""
    url = services.settings.database_url.replace("postgresql+asyncpg", "postgresql")
    killer = await asyncpg.connect(url)
    try:
        pids = [connection.get_server_pid() for connection in connections]
        await killer.execute("SELECT pg_terminate_backend(pid) FROM unnest($1::int[]) pid", pids)
    finally:
        await killer.close()
    await wait_until(
        lambda: all(connection.is_closed() for connection in connections),
        within=5,
        failure="asyncpg never noticed the server closing its connections",
    )


async def _backend_pid(engine: AsyncEngine) -> int:
    async with engine.connect() as connection:
        pid = await connection.scalar(text("SELECT pg_backend_pid()"))
    assert isinstance(pid, int)
    return pid


async def test_a_connection_the_server_closed_in_the_pool_is_replaced_at_checkout(
    services: Services,
) -> None:
    engine = create_engine(services.settings.database_url, pool_size=1, max_overflow=0)
    pooled = Pooled(engine)
    try:
        first = await _backend_pid(engine)
        await _terminate(services, list(pooled.waiting.values()))
        second = await _backend_pid(engine)  # the one pooled connection is gone: a new one
        assert second != first
        assert await _backend_pid(engine) == second  # and the new one is pooled in its place
    finally:
        await engine.dispose()


async def test_without_the_check_the_closed_connection_is_handed_out(
    services: Services,
) -> None:
    """What the check is for: a plain pool hands the dead connection to the next statement."""
    engine = create_async_engine(services.settings.database_url, pool_size=1, max_overflow=0)
    pooled = Pooled(engine)
    try:
        await _backend_pid(engine)
        await _terminate(services, list(pooled.waiting.values()))
        with pytest.raises(DBAPIError):
            await _backend_pid(engine)
    finally:
        await engine.dispose()


async def test_requests_after_the_server_closed_every_pooled_connection_answer(
    user: Client, services: Services
) -> None:
    pooled = Pooled(services.engine)
    try:
        for n in range(3):  # checkouts, so the pool holds connections to close
            created = await user.post("/api/chats", json={"title": f"chat {n}"})
            assert created.status_code == 201
        assert pooled.waiting
        await _terminate(services, list(pooled.waiting.values()))
    finally:
        pooled.close()
    listed = await user.get("/api/chats")
    assert listed.status_code == 200, listed.text
    assert {c["title"] for c in listed.json()["items"]} >= {"chat 0", "chat 1", "chat 2"}
    created = await user.post("/api/chats", json={"title": "after"})
    assert created.status_code == 201, created.text

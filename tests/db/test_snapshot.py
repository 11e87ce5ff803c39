"""`one_snapshot` on both backends: the reads after it see one state of the database.

The chat view reads a chat in several statements; a commit landing between two of them (a
sweep settling the chat) must not show half of it."""

from __future__ import annotations

from uuid import UUID

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from app.core.db.engine import one_snapshot
from app.models import Chat
from tests.support import Client


async def _title(connection: AsyncConnection, chat_id: UUID) -> str | None:
    return await connection.scalar(select(Chat.title).where(Chat.id == chat_id))


async def _rename(engine: AsyncEngine, chat_id: UUID, title: str) -> None:
    async with engine.begin() as other:
        await other.execute(update(Chat).where(Chat.id == chat_id).values(title=title))


async def test_reads_after_one_snapshot_see_one_state_of_the_database(
    user: Client, engine: AsyncEngine
) -> None:
    chat_id = UUID((await user.post("/api/chats", json={"title": "first"})).json()["id"])
    async with engine.connect() as reader:
        await _title(reader, chat_id)  # a read already under way, as authentication leaves one
        await one_snapshot(reader)
        assert await _title(reader, chat_id) == "first"
        await _rename(engine, chat_id, "second")
        assert await _title(reader, chat_id) == "first"  # the snapshot holds
        await reader.rollback()
        assert await _title(reader, chat_id) == "second"  # a new transaction sees the commit


async def test_without_it_each_read_sees_the_latest_commit(
    user: Client, engine: AsyncEngine
) -> None:
    """What `one_snapshot` is for: the same reads without it see the rename in between."""
    chat_id = UUID((await user.post("/api/chats", json={"title": "first"})).json()["id"])
    async with engine.connect() as reader:
        assert await _title(reader, chat_id) == "first"
        await _rename(engine, chat_id, "second")
        assert await _title(reader, chat_id) == "second"


async def test_a_pooled_connection_reads_the_latest_commit_again(
    user: Client, engine: AsyncEngine
) -> None:
    """The snapshot ends with the connection's use: the next user of it is not held in it."""
    chat_id = UUID((await user.post("/api/chats", json={"title": "first"})).json()["id"])
    async with engine.connect() as reader:
        await one_snapshot(reader)
        assert await _title(reader, chat_id) == "first"
    await _rename(engine, chat_id, "second")
    for _ in range(3):  # whichever pooled connection comes back
        async with engine.connect() as reader:
            assert await _title(reader, chat_id) == "second"
            await _rename(engine, chat_id, "third")
            assert await _title(reader, chat_id) == "third"
            await _rename(engine, chat_id, "second")

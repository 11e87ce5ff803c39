"""`one_snapshot` on both backends: the reads after it see one state of the database.

The chat view reads a chat in several statements; a commit landing between two of them (a
sweep settling the chat) must not show half of it."""

from __future__ import annotations

import asyncio
import threading
from typing import Any
from uuid import UUID

from sqlalchemy import event, select, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from app.core.db.engine import create_engine, one_snapshot
from app.models import Chat, ChatLlmTool, Message
from app.services import Services
from tests.support import Client, wait_until_idle


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


async def test_a_chat_is_never_shown_half_settled(
    user: Client, engine: AsyncEngine, services: Services
) -> None:
    """A sweep commits between the chat view's messages read and its tool-calls read (forced
    here, from another thread, the moment the messages have been read): the view shows the
    chat as it was before, whole; the next view shows it after, whole."""
    chat_id = (await user.post("/api/chats", json={})).json()["id"]
    await user.post(f"/api/chats/{chat_id}/messages", json={"content": "Hi"})  # the demo model
    before = await wait_until_idle(user, chat_id)
    [answer] = [m for m in before["messages"] if m["tool_calls"]]
    assert answer["status"] == "ok" and answer["tool_calls"][0]["status"] == "done"

    def settle_elsewhere() -> None:
        async def settle() -> None:
            other = create_engine(services.settings.database_url)
            try:
                async with other.begin() as connection:
                    await connection.execute(
                        update(Message).where(Message.id == answer["id"]).values(status="failed")
                    )
                    await connection.execute(
                        update(ChatLlmTool)
                        .where(ChatLlmTool.message_id == answer["id"])
                        .values(status="failed")
                    )
            finally:
                await other.dispose()

        asyncio.run(settle())

    fired: list[str] = []

    def between_reads(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        if not fired and "FROM messages JOIN path" in statement:
            fired.append(statement)
            worker = threading.Thread(target=settle_elsewhere)
            worker.start()
            worker.join(30)

    event.listen(engine.sync_engine, "after_cursor_execute", between_reads)
    try:
        during = (await user.get(f"/api/chats/{chat_id}")).json()
    finally:
        event.remove(engine.sync_engine, "after_cursor_execute", between_reads)
    assert fired, "the messages read was not seen"
    assert during["messages"] == before["messages"]
    after = (await user.get(f"/api/chats/{chat_id}")).json()
    [settled] = [m for m in after["messages"] if m["id"] == answer["id"]]
    assert settled["status"] == "failed" and settled["tool_calls"][0]["status"] == "failed"

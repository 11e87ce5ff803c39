"""Alembic on both backends: empty -> head -> base -> head, and models match migrations."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import DateTime, TextClause, Uuid, bindparam, inspect
from sqlalchemy import text as sql_text

from app.core.db.base import Base
from app.core.db.engine import create_engine
from app.core.db.migrate import check, downgrade, upgrade
from app.knowledge.index import is_index_object
from tests.support import ROOT, fresh_database


def _tables(sync_connection: object) -> set[str]:
    names = set(inspect(sync_connection).get_table_names()) - {"alembic_version"}
    return {name for name in names if not is_index_object(name, "table")}


async def test_upgrade_downgrade_upgrade_and_check(backend: str, tmp_path: Path) -> None:
    async with fresh_database(backend, tmp_path) as url:
        engine = create_engine(url)
        try:
            await upgrade(engine)
            async with engine.connect() as connection:
                assert await connection.run_sync(_tables) == set(Base.metadata.tables)
            await check(engine)

            await downgrade(engine, "base")
            async with engine.connect() as connection:
                assert await connection.run_sync(_tables) == set()

            await upgrade(engine)
            await check(engine)
        finally:
            await engine.dispose()


@pytest.mark.slow
async def test_alembic_command_line_upgrade_and_check(backend: str, tmp_path: Path) -> None:
    async with fresh_database(backend, tmp_path) as url:
        env = {**os.environ, "HEARTH_DATABASE_URL": url}
        alembic = [sys.executable, "-m", "alembic", "-c", str(ROOT / "alembic.ini")]
        for args in (["upgrade", "head"], ["check"]):
            done = await asyncio.to_thread(
                subprocess.run,
                [*alembic, *args],
                cwd=ROOT,
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert done.returncode == 0, done.stderr
        assert "No new upgrade operations detected" in done.stdout + done.stderr


@pytest.mark.parametrize("table", ["messages", "chat_llm_tools"])
async def test_integer_ids_are_never_reused(backend: str, tmp_path: Path, table: str) -> None:
    """Message and tool-call ids grow with time even after the newest row is deleted."""
    from sqlalchemy import delete, insert, select

    from app.models import Chat, ChatLlmTool, Message, User

    async with fresh_database(backend, tmp_path) as url:
        engine = create_engine(url)
        try:
            await upgrade(engine)
            now = datetime.now(UTC)
            async with engine.begin() as conn:
                user_id = (
                    await conn.execute(
                        insert(User)
                        .values(
                            email="a@b.c",
                            password_hash="x",
                            display_name="a",
                            is_admin=False,
                            created_at=now,
                        )
                        .returning(User.id)
                    )
                ).scalar_one()
                chat_id = (
                    await conn.execute(
                        insert(Chat)
                        .values(user_id=user_id, model="m", created_at=now, updated_at=now)
                        .returning(Chat.id)
                    )
                ).scalar_one()

                async def new_id() -> int:
                    message_id = (
                        await conn.execute(
                            insert(Message)
                            .values(
                                chat_id=chat_id,
                                role="user",
                                content="",
                                status="ok",
                                metadata={},
                                created_at=now,
                            )
                            .returning(Message.id)
                        )
                    ).scalar_one()
                    if table == "messages":
                        return message_id
                    return (
                        await conn.execute(
                            insert(ChatLlmTool)
                            .values(
                                chat_id=chat_id,
                                message_id=message_id,
                                tool_call_id="t",
                                name="n",
                                arguments={},
                                status="done",
                                created_at=now,
                                updated_at=now,
                            )
                            .returning(ChatLlmTool.id)
                        )
                    ).scalar_one()

                first = await new_id()
                model = Message if table == "messages" else ChatLlmTool
                await conn.execute(delete(model).where(model.id == first))
                second = await new_id()
                assert second > first
                assert (await conn.execute(select(model.id))).scalars().all() == [second]
        finally:
            await engine.dispose()


async def test_branches_revision_makes_each_existing_chat_one_branch(
    backend: str, tmp_path: Path
) -> None:
    """Revision 0011 on a populated database: every message's parent is the one stored before
    it in its chat, every chat's active leaf its last message, activations and summaries kept
    where they were; chats interleaved in time do not mix; an empty chat has no leaf."""
    async with fresh_database(backend, tmp_path) as url:
        engine = create_engine(url)
        try:
            await upgrade(engine, "0010")
            async with engine.begin() as conn:
                await conn.execute(
                    text(
                        "INSERT INTO users (id, email, password_hash, display_name, is_admin,"
                        " created_at) VALUES (:id, 'a@b.c', 'x', 'a', false, :now)"
                    ),
                    {"id": USER_ID, "now": NOW},
                )
                for chat in CHATS:
                    await conn.execute(
                        text(
                            "INSERT INTO chats (id, user_id, model, created_at, updated_at,"
                            " turn_stop_requested) VALUES (:id, :user, 'm', :now, :now, false)"
                        ),
                        {"id": chat, "user": USER_ID, "now": NOW},
                    )
                ids: dict[str, list[int]] = {str(chat): [] for chat in CHATS}
                # Two chats written at once: their ids interleave.
                for step in range(7):
                    for chat in CHATS[:2]:
                        role = "user" if step % 2 == 0 else "assistant"
                        row = await conn.execute(
                            text(
                                "INSERT INTO messages (chat_id, role, content, status, metadata,"
                                " created_at) VALUES (:chat, :role, :content, 'ok', '{}', :now)"
                                " RETURNING id"
                            ),
                            {"chat": chat, "role": role, "content": f"m{step}", "now": NOW},
                        )
                        ids[str(chat)].append(row.scalar_one())
                first = ids[str(CHATS[0])]
                await conn.execute(
                    text(
                        "INSERT INTO activated_tools (chat_id, message_id, kind, ref, created_at)"
                        " VALUES (:chat, :message, 'mcp', 'weather', :now)"
                    ),
                    {"chat": CHATS[0], "message": first[1], "now": NOW},
                )
                await conn.execute(
                    text(
                        "INSERT INTO chat_summaries (chat_id, covers_up_to_message_id, content,"
                        " model, input_tokens, output_tokens, created_at)"
                        " VALUES (:chat, :message, 's', 'm', 0, 0, :now)"
                    ),
                    {"chat": CHATS[0], "message": first[3], "now": NOW},
                )

            await upgrade(engine)
            await check(engine)
            async with engine.connect() as conn:
                parents = dict(
                    (await conn.execute(text("SELECT id, parent_id FROM messages"))).all()
                )
                leaves = {
                    str(uuid_of(chat)): leaf
                    for chat, leaf in await conn.execute(
                        text("SELECT id, active_leaf_id FROM chats")
                    )
                }
                anchors = (await conn.execute(text("SELECT message_id FROM activated_tools"))).all()
                covers = (
                    await conn.execute(text("SELECT covers_up_to_message_id FROM chat_summaries"))
                ).all()
            for chat in CHATS[:2]:
                chain = ids[str(chat)]
                assert [parents[i] for i in chain] == [None, *chain[:-1]]
                assert leaves[str(chat)] == chain[-1]
            assert leaves[str(CHATS[2])] is None
            assert anchors == [(first[1],)] and covers == [(first[3],)]
        finally:
            await engine.dispose()


USER_ID = uuid.UUID("7d0a3c3e-8a2f-4c55-9b8e-2b0d1c4e5f60")
CHATS = [uuid.UUID(f"1c8a6d0e-0000-4000-8000-00000000000{n}") for n in (1, 2, 3)]
NOW = datetime(2026, 1, 1, 10, tzinfo=UTC)


def text(statement: str) -> TextClause:
    """Raw SQL with its parameters typed as the tables' columns are (ids as UUIDs, times)."""
    clause = sql_text(statement)
    typed = {"id": Uuid(), "user": Uuid(), "chat": Uuid(), "now": DateTime(timezone=True)}
    return clause.bindparams(
        *(bindparam(name, type_=kind) for name, kind in typed.items() if f":{name}" in statement)
    )


def uuid_of(value: object) -> uuid.UUID:
    """A chat id as read back: a UUID on PostgreSQL, its hex text on SQLite."""
    return value if isinstance(value, uuid.UUID) else uuid.UUID(str(value))

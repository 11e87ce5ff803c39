"""Alembic on both backends: empty -> head -> base -> head, and models match migrations."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import inspect

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
    from datetime import UTC, datetime

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

"""What `hearth users list|disable|enable|set-admin|delete` do, for an operator at a shell.

They are the admin routes' own functions (`app.users.admin`) run against the configured
database, so the rules are the same ones: the last enabled admin cannot be taken away (409 there,
an error here), and disabling or deleting a user stops their running turns in every worker
through the chats' stop flags, which the serving processes read within half a second. A user is
named by email or id. Each function opens its own engine and disposes of it: a command is one
short process.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.clock import Clock
from app.core.db.engine import create_engine, session_factory
from app.core.errors import NotFound
from app.models import User
from app.settings import Settings
from app.users import admin


@asynccontextmanager
async def _database(settings: Settings) -> AsyncIterator[async_sessionmaker[AsyncSession]]:
    engine = create_engine(settings.database_url)
    try:
        yield session_factory(engine)
    finally:
        await engine.dispose()


async def _resolve(db: AsyncSession, who: str) -> uuid.UUID:
    """The id of the user `who` names: an id, or an email in any case."""
    try:
        by_id = uuid.UUID(who)
    except ValueError:
        found = await db.scalar(select(User.id).where(User.email == who.strip().lower()))
    else:
        found = await db.scalar(select(User.id).where(User.id == by_id))
    if found is None:
        raise NotFound(f"no user {who}")
    return found


async def list_users(settings: Settings, q: str | None) -> list[dict[str, Any]]:
    """Every user (or those matching `q`), newest first."""
    rows: list[dict[str, Any]] = []
    async with _database(settings) as sessions, sessions() as db:
        connection = await db.connection()
        page, cursor = await admin.page(connection, q, 500, None)
        rows += page
        while cursor is not None:
            page, cursor = await admin.page(connection, q, 500, cursor)
            rows += page
    return rows


async def update_user(settings: Settings, who: str, changes: dict[str, Any]) -> dict[str, Any]:
    """Apply `changes` to the user; a user disabled has their running turns stopped."""
    clock = Clock()
    async with _database(settings) as sessions, sessions() as db:
        user_id = await _resolve(db, who)
        await admin.update_user(db, user_id, changes)
        if changes.get("disabled"):
            await admin.request_stops(db, user_id, clock.now())
            await db.commit()
        return await admin.one(db, user_id)


async def delete_user(settings: Settings, who: str) -> uuid.UUID:
    """Delete the user and everything that was theirs, rows then files."""
    async with _database(settings) as sessions:
        async with sessions() as db:
            user_id = await _resolve(db, who)
        await admin.delete_user(sessions, settings.data_dir, user_id, Clock())
    return user_id

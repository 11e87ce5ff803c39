"""What an administrator does to accounts: list and search them, enable and disable, grant and
take the admin flag, set a quota, delete a user with everything that was theirs.

**The last admin.** No change may leave the installation without an enabled admin. Two admins
demoting each other at once must not both succeed, so the check runs after the change, inside
its transaction, with the enabled admins' rows locked first on PostgreSQL (`FOR UPDATE`); on
SQLite the change's own write takes the database's single write lock before the count is read.
A change that would leave none is rolled back and answered 409.

**Stopping a user's turns.** Disabling or deleting a user stops their running turns wherever they
run: this process's at once, other workers' through the stop flag on the chat, which they read
within half a second. A deletion then waits (`TURNS_END_WITHIN`) for those turns to let go of
their chats, so no turn writes a row or a file for a user who is gone.

**Deleting.** The user's row goes in one transaction, and with it, by the schema's cascades, every
row that was theirs (chats, messages, tool calls, uploads, knowledge, evidence, sessions, keys,
MCP connections, the request log). Files go after the commit: a deletion that fails keeps them.
"""

from __future__ import annotations

import asyncio
import shutil
import uuid
from collections.abc import Awaitable, Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy import and_, delete, func, or_, select, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession

from app.clock import Clock
from app.core.db.engine import rows_changed
from app.core.errors import Conflict, NotFound
from app.core.http.pagination import Cursor
from app.models import AuthSession, Chat, User

TURNS_END_WITHIN = 15.0
"""Seconds a deletion waits for the user's turns in other workers to stop."""
LAST_ADMIN = "this would leave no enabled administrator"
NO_USER = "no such user"


def user_view(row: Any) -> dict[str, Any]:
    return {
        "id": row.id,
        "email": row.email,
        "display_name": row.display_name,
        "is_admin": row.is_admin,
        "created_at": row.created_at,
        "disabled": row.disabled,
        "last_seen_at": row.last_seen_at,
        "quota": row.quota,
    }


_LAST_SEEN = (
    select(func.max(AuthSession.last_seen_at))
    .where(AuthSession.user_id == User.id)
    .correlate(User)
    .scalar_subquery()
    .label("last_seen_at")
)
_COLUMNS = (
    User.id,
    User.email,
    User.display_name,
    User.is_admin,
    User.created_at,
    User.disabled,
    User.quota,
    _LAST_SEEN,
)


def _like(text: str) -> str:
    escaped = text.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


async def page(
    connection: AsyncConnection, q: str | None, limit: int, cursor: str | None
) -> tuple[list[dict[str, Any]], str | None]:
    """A page of users, newest first, those whose email or display name contains `q`."""
    query = select(*_COLUMNS)
    if q:
        pattern = _like(q)
        query = query.where(
            or_(
                User.email.like(pattern, escape="\\"),
                func.lower(User.display_name).like(pattern, escape="\\"),
            )
        )
    if cursor:
        after = Cursor.decode(cursor)
        query = query.where(
            or_(
                User.created_at < after.at,
                and_(User.created_at == after.at, User.id < after.id),
            )
        )
    query = query.order_by(User.created_at.desc(), User.id.desc()).limit(limit + 1)
    rows = (await connection.execute(query)).all()
    shown = rows[:limit]
    more = len(rows) > limit
    next_cursor = Cursor(shown[-1].created_at, shown[-1].id).encode() if more else None
    return [user_view(row) for row in shown], next_cursor


async def one(db: AsyncSession | AsyncConnection, user_id: uuid.UUID) -> dict[str, Any]:
    row = (await db.execute(select(*_COLUMNS).where(User.id == user_id))).first()
    if row is None:
        raise NotFound(NO_USER)
    return user_view(row)


async def _lock_admins(db: AsyncSession) -> None:
    """On PostgreSQL, lock the enabled admins' rows: changes to them queue behind each other."""
    if db.get_bind().dialect.name == "postgresql":
        await db.execute(
            select(User.id).where(User.is_admin, User.disabled.is_(False)).with_for_update()
        )


async def _admins_left(db: AsyncSession) -> int:
    count = await db.scalar(
        select(func.count()).select_from(User).where(User.is_admin, User.disabled.is_(False))
    )
    return int(count or 0)


async def update_user(db: AsyncSession, user_id: uuid.UUID, changes: dict[str, Any]) -> None:
    """Apply `changes` (`is_admin`, `disabled`, `quota`) and commit; 409 past the last admin."""
    await _lock_admins(db)
    if changes:
        changed = await rows_changed(db, update(User).where(User.id == user_id).values(**changes))
    else:
        changed = int(await db.scalar(select(func.count()).where(User.id == user_id)) or 0)
    if not changed:
        await db.rollback()
        raise NotFound(NO_USER)
    if (changes.get("is_admin") is False or changes.get("disabled")) and not await _admins_left(db):
        await db.rollback()
        raise Conflict(LAST_ADMIN)
    await db.commit()


async def request_stops(db: AsyncSession, user_id: uuid.UUID, now: datetime) -> None:
    """Flag every running turn of the user to stop, wherever it runs (committed by the caller)."""
    await db.execute(
        update(Chat)
        .where(Chat.user_id == user_id, Chat.turn_owner.is_not(None), Chat.turn_lease_until >= now)
        .values(turn_stop_requested=True)
    )


async def turns_running(db: AsyncSession, user_id: uuid.UUID, now: datetime) -> int:
    count = await db.scalar(
        select(func.count())
        .select_from(Chat)
        .where(Chat.user_id == user_id, Chat.turn_owner.is_not(None), Chat.turn_lease_until >= now)
    )
    return int(count or 0)


async def wait_for_turns(
    sessions: Callable[[], AsyncSession], user_id: uuid.UUID, clock: Clock, within: float
) -> None:
    """Wait until no turn of the user holds a chat (or `within` seconds have passed)."""
    deadline = clock.monotonic() + within
    while True:
        async with sessions() as db:
            if not await turns_running(db, user_id, clock.now()):
                return
        if clock.monotonic() >= deadline:
            return
        await asyncio.sleep(0.1)


async def delete_user(
    sessions: Callable[[], AsyncSession],
    data_dir: Path,
    user_id: uuid.UUID,
    clock: Clock,
    stop_local: Callable[[uuid.UUID], Awaitable[None]] | None = None,
) -> None:
    """Delete the user and everything that was theirs; 404 unknown, 409 the last admin.

    The last-admin check runs twice: before anything is stopped (so a refused deletion leaves
    the user's turns running) and again inside the deleting transaction (so two deletions at
    once cannot both pass it).
    """
    async with sessions() as db:
        target = (
            await db.execute(select(User.is_admin, User.disabled).where(User.id == user_id))
        ).first()
        if target is None:
            raise NotFound(NO_USER)
        if target.is_admin and not target.disabled and await _admins_left(db) <= 1:
            raise Conflict(LAST_ADMIN)
        await request_stops(db, user_id, clock.now())
        await db.commit()
    if stop_local is not None:
        await stop_local(user_id)
    await wait_for_turns(sessions, user_id, clock, TURNS_END_WITHIN)
    async with sessions() as db:
        await _lock_admins(db)
        if not await rows_changed(db, delete(User).where(User.id == user_id)):
            await db.rollback()
            raise NotFound(NO_USER)
        if not await _admins_left(db):
            await db.rollback()
            raise Conflict(LAST_ADMIN)
        await db.commit()
    await asyncio.to_thread(shutil.rmtree, data_dir / "users" / str(user_id), True)

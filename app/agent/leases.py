"""One turn per chat at a time, across every worker process: a lease in the chats table.

Acquiring is one conditional UPDATE (the chat is free, or its lease has lapsed), so two
processes racing for a chat can't both win, on SQLite or PostgreSQL. The owner renews the
lease while the turn runs; a process that dies stops renewing and its lease lapses after
`HEARTH_TURN_LEASE_SECONDS`. A stop request is a flag on the same row, which the owning
process polls, so `/stop` works whichever worker receives it.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta

from sqlalchemy import bindparam, exists, func, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.sql.elements import ColumnElement

from app.core.db.engine import rows_changed
from app.models import Chat, ChatLlmTool, Message


def _free(now: datetime) -> ColumnElement[bool]:
    return or_(Chat.turn_lease_until.is_(None), Chat.turn_lease_until < now)


async def acquire(
    db: AsyncSession,
    chat_id: uuid.UUID,
    user_id: uuid.UUID,
    owner: str,
    now: datetime,
    lease: timedelta,
    *,
    for_message: bool = False,
    title: str | None = None,
) -> bool:
    """Take the chat's lease; False when a live turn holds it.

    For a turn that answers a new message (`for_message`) the same statement also requires
    that no tool call waits for the user's approval, marks the chat updated and gives it
    `title` if it has none: sending a message checks and writes the chat row in one UPDATE.
    """
    statement = (
        update(Chat)
        .where(Chat.id == chat_id, Chat.user_id == user_id, _free(now))
        .values(turn_owner=owner, turn_lease_until=now + lease, turn_stop_requested=False)
        .execution_options(synchronize_session=False)
    )
    if for_message:
        pending = exists().where(ChatLlmTool.chat_id == chat_id, ChatLlmTool.status == "pending")
        statement = statement.where(~pending).values(
            updated_at=now, title=func.coalesce(Chat.title, title)
        )
    return bool(await rows_changed(db, statement))


async def settle_orphans(db: AsyncSession, chat_id: uuid.UUID, now: datetime) -> None:
    """Close what a turn of a dead process left open; call it holding the chat's lease.

    A round still `streaming` becomes `incomplete` (its partial text stays) and a tool call still
    `running` becomes `cancelled`; the builder replays such calls to the model as interrupted.
    """
    await db.execute(
        update(Message)
        .where(Message.chat_id == chat_id, Message.status == "streaming")
        .values(status="incomplete", error="the turn was interrupted before this round ended")
    )
    await db.execute(
        update(ChatLlmTool)
        .where(ChatLlmTool.chat_id == chat_id, ChatLlmTool.status == "running")
        .values(status="cancelled", updated_at=now)
    )


async def renew(db: AsyncSession, owners: list[str], now: datetime, lease: timedelta) -> None:
    if owners:
        await db.execute(
            update(Chat).where(Chat.turn_owner.in_(owners)).values(turn_lease_until=now + lease)
        )


async def release(db: AsyncSession, chat_id: uuid.UUID, owner: str, now: datetime) -> None:
    await db.execute(
        update(Chat)
        .where(Chat.id == chat_id, Chat.turn_owner == owner)
        .values(turn_owner=None, turn_lease_until=None, turn_stop_requested=False, updated_at=now)
    )


async def request_stop(
    db: AsyncSession, chat_id: uuid.UUID, user_id: uuid.UUID, now: datetime
) -> bool:
    """Flag the running turn of the chat to stop; False when no turn holds a live lease."""
    flagged = await rows_changed(
        db,
        update(Chat)
        .where(
            Chat.id == chat_id,
            Chat.user_id == user_id,
            Chat.turn_owner.is_not(None),
            Chat.turn_lease_until >= now,
        )
        .values(turn_stop_requested=True),
    )
    return bool(flagged)


async def stop_requested(db: AsyncSession, owners: list[str]) -> list[str]:
    if not owners:
        return []
    rows = await db.scalars(
        select(Chat.turn_owner).where(Chat.turn_owner.in_(owners), Chat.turn_stop_requested)
    )
    return [owner for owner in rows if owner is not None]


_SAVE_PARTIAL = (
    update(Message.__table__)  # type: ignore[arg-type]
    .where(Message.__table__.c.id == bindparam("row"), Message.__table__.c.status == "streaming")
    .values(content=bindparam("text"), reasoning=bindparam("thought"))
)


async def save_partial(db: AsyncSession, rounds: list[tuple[int, str, str | None]]) -> None:
    """Write the partial text of streaming rounds, all in one statement; a round that has
    ended meanwhile keeps its own last write (`streaming` rows only)."""
    if rounds:
        params = [{"row": row, "text": text, "thought": thought} for row, text, thought in rounds]
        connection = await db.connection()
        await connection.execute(_SAVE_PARTIAL, params)

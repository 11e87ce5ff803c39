"""A user's API keys and sessions as lists a person manages: make, list, revoke.

The key itself is made and checked in `app.auth.keys`; here are the rows' life and their views.
A user holds at most `MAX_KEYS` live keys, so a runaway script cannot fill the table, and the
sessions list shows the `MAX_LISTED` most recently seen (older ones lapse on their own).
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import func, or_, select, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession

from app.auth.keys import key_row
from app.auth.sessions import SessionPolicy
from app.core.db.engine import rows_changed
from app.core.errors import Conflict, NotFound
from app.models import ApiKey, AuthSession

MAX_KEYS = 100
MAX_LISTED = 200


def _live_key(user_id: uuid.UUID, now: datetime) -> Any:
    return (
        (ApiKey.user_id == user_id)
        & ApiKey.revoked_at.is_(None)
        & or_(ApiKey.expires_at.is_(None), ApiKey.expires_at > now)
    )


def key_view(row: Any) -> dict[str, Any]:
    return {
        "id": row.id,
        "name": row.name,
        "prefix": row.prefix,
        "created_at": row.created_at,
        "expires_at": row.expires_at,
        "last_used_at": row.last_used_at,
    }


async def create_key(
    db: AsyncSession, user_id: uuid.UUID, name: str, now: datetime, expires_in_days: int | None
) -> dict[str, Any]:
    """A new key for `user_id`: its view and, once, the key itself."""
    held = await db.scalar(select(func.count()).where(_live_key(user_id, now)))
    if (held or 0) >= MAX_KEYS:
        raise Conflict(f"a user holds at most {MAX_KEYS} API keys; delete one first")
    expires_at = now + timedelta(days=expires_in_days) if expires_in_days else None
    row, key = key_row(user_id, name, now, expires_at)
    db.add(row)
    await db.commit()
    return {**key_view(row), "key": key}


async def list_keys(
    connection: AsyncConnection, user_id: uuid.UUID, now: datetime
) -> list[dict[str, Any]]:
    """The user's keys that still work, newest first."""
    rows = await connection.execute(
        select(ApiKey).where(_live_key(user_id, now)).order_by(ApiKey.created_at.desc())
    )
    return [key_view(row) for row in rows]


async def revoke_key(
    db: AsyncSession, user_id: uuid.UUID, key_id: uuid.UUID, now: datetime
) -> None:
    revoked = await rows_changed(
        db,
        update(ApiKey).where(ApiKey.id == key_id, _live_key(user_id, now)).values(revoked_at=now),
    )
    if not revoked:
        raise NotFound("no such API key")
    await db.commit()


def _live_session(user_id: uuid.UUID, now: datetime, policy: SessionPolicy) -> Any:
    return (
        (AuthSession.user_id == user_id)
        & AuthSession.revoked_at.is_(None)
        & (AuthSession.expires_at > now)
        & (AuthSession.last_seen_at > now - policy.idle)
    )


async def list_sessions(
    connection: AsyncConnection,
    user_id: uuid.UUID,
    now: datetime,
    policy: SessionPolicy,
    current: uuid.UUID | None,
) -> list[dict[str, Any]]:
    """The user's live sessions, most recently seen first."""
    rows = await connection.execute(
        select(
            AuthSession.id,
            AuthSession.created_at,
            AuthSession.last_seen_at,
            AuthSession.user_agent,
        )
        .where(_live_session(user_id, now, policy))
        .order_by(AuthSession.last_seen_at.desc(), AuthSession.id)
        .limit(MAX_LISTED)
    )
    return [
        {
            "id": row.id,
            "created_at": row.created_at,
            "last_seen_at": row.last_seen_at,
            "user_agent": row.user_agent,
            "current": row.id == current,
        }
        for row in rows
    ]


async def revoke_one_session(
    db: AsyncSession,
    user_id: uuid.UUID,
    session_id: uuid.UUID,
    now: datetime,
    policy: SessionPolicy,
) -> None:
    revoked = await rows_changed(
        db,
        update(AuthSession)
        .where(AuthSession.id == session_id, _live_session(user_id, now, policy))
        .values(revoked_at=now),
    )
    if not revoked:
        raise NotFound("no such session")
    await db.commit()

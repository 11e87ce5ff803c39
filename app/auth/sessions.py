"""Server-side sessions: created at login, checked on every request, revoked at logout.

Expiry is decided here, on the server, from two clocks: idle time since the session was last
seen and the absolute lifetime from its creation. `last_seen_at` is written at most once a
minute per session, so a busy client doesn't turn every read into a write.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.auth.tokens import TokenCodec
from app.db.models import AuthSession, User

TOUCH_INTERVAL = timedelta(seconds=60)


@dataclass(frozen=True, slots=True)
class SessionPolicy:
    idle: timedelta
    lifetime: timedelta


@dataclass(slots=True)
class Authenticated:
    """The signed-in user of a request and the session that proves it."""

    user: User
    session_id: uuid.UUID
    token: str


async def open_session(
    db: AsyncSession, codec: TokenCodec, user: User, now: datetime, policy: SessionPolicy
) -> str:
    """Create a fresh session for `user` and return its token (a new id on every login)."""
    token = codec.new_token()
    db.add(
        AuthSession(
            user_id=user.id,
            token_hash=codec.hash(token),
            created_at=now,
            last_seen_at=now,
            expires_at=now + policy.lifetime,
        )
    )
    return token


async def resolve_session(
    db: AsyncSession, codec: TokenCodec, cookie: str, now: datetime, policy: SessionPolicy
) -> Authenticated | None:
    """The live session behind a cookie, or None (bad signature, unknown, expired, revoked)."""
    token = codec.unsign(cookie)
    if token is None:
        return None
    row = (
        await db.execute(
            select(AuthSession.id, AuthSession.last_seen_at, User)
            .join(User, User.id == AuthSession.user_id)
            .where(
                AuthSession.token_hash == codec.hash(token),
                AuthSession.revoked_at.is_(None),
                AuthSession.expires_at > now,
                AuthSession.last_seen_at > now - policy.idle,
            )
        )
    ).one_or_none()
    if row is None:
        return None
    session_id, last_seen, user = row
    if now - last_seen >= TOUCH_INTERVAL:
        await db.execute(
            update(AuthSession).where(AuthSession.id == session_id).values(last_seen_at=now)
        )
        await db.commit()
    return Authenticated(user=user, session_id=session_id, token=token)


async def revoke_session(db: AsyncSession, session_id: uuid.UUID, now: datetime) -> None:
    await db.execute(
        update(AuthSession)
        .where(AuthSession.id == session_id, AuthSession.revoked_at.is_(None))
        .values(revoked_at=now)
    )

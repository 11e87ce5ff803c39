"""Creating a user: the one path for sign-up, `hearth users create` and the tests.

The caller validates the address and password (`RegisterIn`) and hashes the password (in the
hashing queue, `app.auth.passwords`); this adds the row in the caller's transaction, so a
sign-up opens its first session in the same commit. An address taken meanwhile by a parallel
request is the same `EmailTaken` as one taken before.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.errors import Conflict
from app.models import User


class EmailTaken(Conflict):
    def __init__(self) -> None:
        super().__init__("an account with this email exists")


async def create_user(
    db: AsyncSession,
    *,
    email: str,
    password_hash: str,
    now: datetime,
    display_name: str | None = None,
    is_admin: bool = False,
) -> User:
    """Add the user (flushed, not committed); `EmailTaken` when the address is in use."""
    if await db.scalar(select(User.id).where(User.email == email)) is not None:
        raise EmailTaken
    user = User(
        email=email,
        password_hash=password_hash,
        display_name=display_name or email.split("@", 1)[0],
        is_admin=is_admin,
        created_at=now,
    )
    db.add(user)
    try:
        await db.flush()
    except IntegrityError:
        await db.rollback()
        raise EmailTaken from None
    return user

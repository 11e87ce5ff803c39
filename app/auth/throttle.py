"""Login throttling: failed attempts per email and per client address in a sliding window.

Failures are rows in the database, so every worker process sees the same count. Past the
limit a login is refused before the password is checked, with the seconds until the window
frees a slot in `Retry-After`.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta

from sqlalchemy import delete, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import LoginFailure

WINDOW = timedelta(minutes=15)


def throttle_keys(email: str, address: str | None) -> list[str]:
    keys = [f"email:{email}"]
    if address:
        keys.append(f"ip:{address}")
    return keys


async def retry_after(
    db: AsyncSession, keys: list[str], now: datetime, max_failures: int
) -> int | None:
    """Seconds to wait when any key is at its limit, else None."""
    wait = 0.0
    for key in keys:
        stamps = (
            await db.scalars(
                select(LoginFailure.created_at)
                .where(LoginFailure.key == key, LoginFailure.created_at > now - WINDOW)
                .order_by(LoginFailure.created_at)
            )
        ).all()
        if len(stamps) >= max_failures:
            frees_at = stamps[len(stamps) - max_failures] + WINDOW
            wait = max(wait, (frees_at - now).total_seconds())
    return max(1, math.ceil(wait)) if wait > 0 else None


async def record_failure(db: AsyncSession, keys: list[str], now: datetime) -> None:
    await db.execute(delete(LoginFailure).where(LoginFailure.created_at <= now - WINDOW))
    db.add_all(LoginFailure(key=key, created_at=now) for key in keys)


async def clear_failures(db: AsyncSession, key: str) -> None:
    await db.execute(delete(LoginFailure).where(LoginFailure.key == key))

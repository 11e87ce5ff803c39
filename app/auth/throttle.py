"""Limits on sign-in and sign-up attempts, counted in the database before the work is done.

Attempts are rows of one keyed event table (`login_failures`), so every worker process sees the
same counts. An attempt is recorded *first* and counted including itself, in one transaction
that holds a lock per key until it commits: of any number of parallel attempts under one key,
exactly as many as the limit get through, however many workers serve them. On PostgreSQL the
lock is a transaction-scoped advisory lock per key (taken in sorted order, so two attempts that
share keys never deadlock); on SQLite the insert itself takes the database's single write lock.
An attempt past a limit is rolled back (it does not count, so retrying while refused does not
push the window on) and answered 429 with the seconds until the window frees a slot.

Sign-in keys:
- `login:<email>|<address>`: the hard limit (`login_max_failures`). An admitted attempt stays
  counted as a failure unless the password was right; a success clears the pair's failures.
  Keying on the pair means guessing at someone's password never locks them out of their own
  network.
- `ip:<address>`: a looser hard limit for one address whatever the email
  (`login_max_failures_per_address`); a success takes its own attempt back.
- `email:<email>`: failures from any address. Past `login_max_failures` the answer is slowed
  down (a pause before the check, doubling with each failure, capped at `SLOWDOWN_CAP`), never
  refused: a distributed guesser is slowed, the owner still gets in.

Sign-up key: `signup:<address>`, `registrations_per_hour` per hour, every admitted attempt
counted. Addresses are `addresses.address_key`s (an IPv6 client counts by its /64).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

import anyio
from sqlalchemy import delete, func, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.auth.addresses import address_key
from app.models import LoginFailure
from app.settings import Settings

WINDOW = timedelta(minutes=15)
"""The sign-in window."""
SIGNUP_WINDOW = timedelta(hours=1)
KEEP = max(WINDOW, SIGNUP_WINDOW)
"""Rows older than this count for nothing and are swept."""
SWEEP_BATCH = 500
SLOWDOWN_STEP = 0.25
SLOWDOWN_CAP = 4.0


@dataclass(frozen=True, slots=True)
class Limit:
    key: str
    max: int
    window: timedelta


class Throttled(Exception):
    """An attempt past a limit; `retry_after` is in whole seconds (at least 1)."""

    def __init__(self, retry_after: int) -> None:
        super().__init__(f"retry after {retry_after} s")
        self.retry_after = retry_after


def pair_key(email: str, address: str) -> str:
    return f"login:{email}|{address_key(address)}"


def address_limit_key(address: str) -> str:
    return f"ip:{address_key(address)}"


def email_key(email: str) -> str:
    return f"email:{email}"


def login_limits(email: str, address: str, settings: Settings) -> list[Limit]:
    return [
        Limit(pair_key(email, address), settings.login_max_failures, WINDOW),
        Limit(address_limit_key(address), settings.login_max_failures_per_address, WINDOW),
    ]


def signup_limit(address: str, settings: Settings) -> Limit:
    return Limit(f"signup:{address_key(address)}", settings.registrations_per_hour, SIGNUP_WINDOW)


def _lock_id(key: str) -> int:
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big", signed=True)


async def admit(db: AsyncSession, limits: Sequence[Limit], now: datetime) -> dict[str, int]:
    """Record one attempt under each limit's key and commit it, or raise `Throttled`.

    Returns the id of each recorded row by key, so the caller can take one back. Must start a
    fresh transaction on `db` (nothing read or written in it yet) and ends it either way.
    """
    by_key = {limit.key: limit for limit in limits}
    if db.get_bind().dialect.name == "postgresql":
        for key in sorted(by_key):
            await db.execute(select(func.pg_advisory_xact_lock(_lock_id(key))))
    rows = {key: LoginFailure(key=key, created_at=now) for key in sorted(by_key)}
    db.add_all(rows.values())
    await db.flush()
    wait = 0.0
    for key, limit in by_key.items():
        stamps = (
            await db.scalars(
                select(LoginFailure.created_at)
                .where(
                    LoginFailure.key == key,
                    LoginFailure.created_at > now - limit.window,
                    LoginFailure.id != rows[key].id,
                )
                .order_by(LoginFailure.created_at)
            )
        ).all()
        if len(stamps) >= limit.max:
            frees_at = stamps[len(stamps) - limit.max] + limit.window
            wait = max(wait, (frees_at - now).total_seconds(), 1.0)
    if wait > 0:
        await db.rollback()
        raise Throttled(math.ceil(wait))
    await _sweep(db, now)
    await db.commit()
    return {key: row.id for key, row in rows.items()}


async def _sweep(db: AsyncSession, now: datetime) -> None:
    """Delete a batch of rows too old to count, skipping rows another transaction holds."""
    stale = (
        select(LoginFailure.id)
        .where(LoginFailure.created_at <= now - KEEP)
        .limit(SWEEP_BATCH)
        .with_for_update(skip_locked=True)
    )
    await db.execute(delete(LoginFailure).where(LoginFailure.id.in_(stale)))


async def failures(db: AsyncSession, key: str, now: datetime) -> int:
    """How many failures `key` has in the sign-in window."""
    count = await db.scalar(
        select(func.count())
        .select_from(LoginFailure)
        .where(LoginFailure.key == key, LoginFailure.created_at > now - WINDOW)
    )
    return count or 0


def slowdown(failures: int, limit: int) -> float:
    """Seconds to pause before checking a password whose email has `failures` failures."""
    if failures < limit:
        return 0.0
    return min(SLOWDOWN_CAP, SLOWDOWN_STEP * 2.0 ** min(failures - limit, 16))


async def pause(seconds: float) -> None:
    """The slowdown's wait (a seam: tests record it instead of waiting)."""
    await anyio.sleep(seconds)


def record_failure(db: AsyncSession, key: str, now: datetime) -> None:
    db.add(LoginFailure(key=key, created_at=now))


async def forget(db: AsyncSession, ids: Sequence[int]) -> None:
    """Take back recorded attempts (an attempt that turned out not to be a failure)."""
    await db.execute(delete(LoginFailure).where(LoginFailure.id.in_(ids)))


async def clear(db: AsyncSession, key: str) -> None:
    await db.execute(delete(LoginFailure).where(LoginFailure.key == key))

"""Accounts: creating a user (the one path for sign-up, `hearth users create` and the tests),
signing up and signing in.

`create_user` takes an address and password already validated (`RegisterIn`) and a password
already hashed (in the hashing queue, `app.auth.passwords`), and adds the row in the caller's
transaction, so a sign-up opens its first session in the same commit. An address taken
by a parallel request is the same `EmailTaken` as one taken before.

Sign-up and sign-in are the two actions anyone can take, and each costs an Argon2 hash, so both
pass the throttle (`app.auth.throttle`) before any password work: the attempt is counted first,
then the password is hashed or checked.
"""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from app.auth import throttle
from app.auth.passwords import hash_password, verify_password
from app.auth.sessions import open_session, revoke_sessions
from app.core.errors import Conflict, Forbidden, TooManyRequests, Unauthorized
from app.models import User
from app.services import Services


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
    """Add the user (flushed, not committed); `EmailTaken` when the address is in use.

    The unique index decides, so an address taken by a parallel request between a caller's own
    check and this write is refused the same way (the caller's transaction is rolled back)."""
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


def _too_many(message: str, throttled: throttle.Throttled) -> TooManyRequests:
    return TooManyRequests(message, throttled.retry_after)


async def sign_up(
    services: Services,
    db: AsyncSession,
    address: str,
    *,
    email: str,
    password: str,
    display_name: str | None,
    user_agent: str | None = None,
) -> tuple[User, str]:
    """Create an account and open its first session; the user and the session token."""
    if not services.settings.allow_registration:
        raise Forbidden("registration is closed")
    now = services.clock.now()
    limit = throttle.signup_limit(address, services.settings)
    try:
        await throttle.admit(db, [limit], now)
    except throttle.Throttled as exc:
        raise _too_many("too many sign-ups from this address; try again later", exc) from exc
    if await db.scalar(select(User.id).where(User.email == email)) is not None:
        raise EmailTaken  # checked before the hash: a taken address costs no Argon2 work
    user = await create_user(
        db,
        email=email,
        password_hash=await hash_password(password),
        display_name=display_name,
        now=now,
    )
    token = await open_session(db, services.codec, user, now, services.session_policy, user_agent)
    await db.commit()
    return user, token


async def _password_holds(
    services: Services, db: AsyncSession, address: str, *, email: str, password: str
) -> User:
    """The enabled user whose password this is, through the sign-in throttle; 401 otherwise.

    Sign-in and a password change share it, so a guess at the current password is counted as a
    failed sign-in. A disabled user's right password is a failure like any other: the answer
    and the Argon2 work are those of a wrong one."""
    settings = services.settings
    now = services.clock.now()
    limits = throttle.login_limits(email, address, settings)
    try:
        attempt = await throttle.admit(db, limits, now)
    except throttle.Throttled as exc:
        raise _too_many("too many failed sign-ins; try again later", exc) from exc
    email_key = throttle.email_key(email)
    delay = throttle.slowdown(
        await throttle.failures(db, email_key, now), settings.login_max_failures
    )
    if delay:
        await throttle.pause(delay)
    user = await db.scalar(select(User).where(User.email == email))
    usable = user is not None and not user.disabled
    if not await verify_password(user.password_hash if usable and user else None, password):
        # The attempt's own rows stay: they were counted as failures from the start.
        throttle.record_failure(db, email_key, now)
        await db.commit()
        raise Unauthorized("wrong email or password")
    assert user is not None
    pair, per_address = (limit.key for limit in limits)
    await throttle.clear(db, pair)
    await throttle.forget(db, [attempt[per_address]])
    return user


async def sign_in(
    services: Services,
    db: AsyncSession,
    address: str,
    *,
    email: str,
    password: str,
    user_agent: str | None = None,
) -> tuple[User, str]:
    """Check the password and open a session; the user and the session token."""
    user = await _password_holds(services, db, address, email=email, password=password)
    token = await open_session(
        db, services.codec, user, services.clock.now(), services.session_policy, user_agent
    )
    await db.commit()
    return user, token


async def change_password(
    services: Services,
    db: AsyncSession,
    address: str,
    *,
    email: str,
    current: str,
    new: str,
    keep_session: uuid.UUID,
) -> None:
    """Set a new password once the current one is proven; every other session is signed out."""
    user = await _password_holds(services, db, address, email=email, password=current)
    user.password_hash = await hash_password(new)
    await revoke_sessions(db, user.id, services.clock.now(), keep=keep_session)
    await db.commit()

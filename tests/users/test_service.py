"""`create_user`, the one path that makes users: defaults, and a taken address in both ways
it can be taken (before the call, and by a parallel request that has not committed yet)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError

from app.models import User
from app.services import Services
from app.users.service import EmailTaken, create_user


async def test_a_user_is_added_with_a_display_name_from_the_address(services: Services) -> None:
    now = services.clock.now()
    async with services.sessions() as db:
        user = await create_user(db, email="ada@example.com", password_hash="h", now=now)
        await db.commit()
        assert (user.display_name, user.is_admin, user.created_at) == ("ada", False, now)
    async with services.sessions() as db:
        named = await create_user(
            db, email="bo@example.com", password_hash="h", now=now, display_name="Bo", is_admin=True
        )
        await db.commit()
        assert (named.display_name, named.is_admin) == ("Bo", True)


async def test_an_address_in_use_is_email_taken(services: Services) -> None:
    now = services.clock.now()
    async with services.sessions() as db:
        await create_user(db, email="ada@example.com", password_hash="h", now=now)
        await db.commit()
    async with services.sessions() as db:
        with pytest.raises(EmailTaken) as refused:
            await create_user(db, email="ada@example.com", password_hash="h2", now=now)
    assert (refused.value.status, refused.value.detail) == (
        409,
        "an account with this email exists",
    )


async def test_an_address_taken_by_a_parallel_request_is_email_taken(services: Services) -> None:
    now = services.clock.now()
    async with services.sessions() as first, services.sessions() as second:
        await create_user(first, email="ada@example.com", password_hash="h", now=now)
        # The second request writes while the first has not committed: its insert waits on the
        # unique index (or the database lock) and is refused once the first commits.
        writing = asyncio.Event()
        flush = second.flush

        async def flush_announced(*args: Any, **kwargs: Any) -> None:
            writing.set()
            await flush(*args, **kwargs)

        second.flush = flush_announced  # type: ignore[method-assign]
        racing = asyncio.create_task(
            create_user(second, email="ada@example.com", password_hash="h2", now=now)
        )
        await writing.wait()
        await first.commit()
        with pytest.raises(EmailTaken) as refused:
            await racing
        assert isinstance(refused.value.__context__, IntegrityError)
    async with services.sessions() as db:
        count = await db.scalar(select(func.count()).select_from(User))
    assert count == 1

"""A turn's model request stored with its addition to the user's day, on both databases
(`app.llm.usage.log_request`): one statement on PostgreSQL, which lands once however often it
is tried."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import select

from app.llm.usage import log_request
from app.models import LlmRequest, UsageDaily
from app.services import Services
from tests.support import Client

pytestmark = pytest.mark.usefixtures("services")


def request_values(
    user: Client, chat_id: uuid.UUID, services: Services, **more: Any
) -> dict[str, Any]:
    return {
        "user_id": uuid.UUID(user.user["id"]),
        "chat_id": chat_id,
        "message_id": None,
        "model": "fake/model-a",
        "provider": "fake",
        "started_at": services.clock.now(),
        "duration_ms": 12,
        "error": None,
        **more,
    }


async def stored(services: Services, user: Client) -> tuple[list[tuple[Any, ...]], list[Any]]:
    owner = uuid.UUID(user.user["id"])
    async with services.sessions() as db:
        requests = (
            await db.execute(
                select(
                    LlmRequest.model,
                    LlmRequest.duration_ms,
                    LlmRequest.input_tokens,
                    LlmRequest.output_tokens,
                    LlmRequest.error,
                )
                .where(LlmRequest.user_id == owner)
                .order_by(LlmRequest.id)
            )
        ).all()
        days = (
            await db.execute(
                select(
                    UsageDaily.model,
                    UsageDaily.day,
                    UsageDaily.requests,
                    UsageDaily.input_tokens,
                    UsageDaily.output_tokens,
                    UsageDaily.cache_read_tokens,
                    UsageDaily.cache_write_tokens,
                ).where(UsageDaily.user_id == owner)
            )
        ).all()
    return [tuple(r) for r in requests], [tuple(d) for d in days]


async def test_requests_add_up_in_their_users_day(user: Client, services: Services) -> None:
    chat_id = uuid.UUID((await user.post("/api/chats", json={})).json()["id"])
    answered = request_values(
        user,
        chat_id,
        services,
        input_tokens=100,
        output_tokens=7,
        cache_read_tokens=60,
        cache_write_tokens=5,
    )
    await log_request(services.alone, answered)
    failed = request_values(user, chat_id, services, error="the provider answered 500")
    failed["started_at"] += timedelta(seconds=1)
    await log_request(services.alone, failed)
    requests, days = await stored(services, user)
    assert requests == [
        ("fake/model-a", 12, 100, 7, None),
        ("fake/model-a", 12, None, None, "the provider answered 500"),
    ]
    assert days == [("fake/model-a", answered["started_at"].date(), 2, 100, 7, 60, 5)]


async def test_a_request_tried_again_after_it_landed_lands_once(
    backend: str, user: Client, services: Services
) -> None:
    """As when the connection drops after the commit, before its answer: PostgreSQL's one
    statement finds the chat's request of that instant and adds nothing. (SQLite has no
    connection to drop: `insert_once` there remembers the ids of its own attempts.)"""
    if backend != "postgresql":
        pytest.skip("one statement, tried again, is PostgreSQL's way")
    chat_id = uuid.UUID((await user.post("/api/chats", json={})).json()["id"])
    values = request_values(user, chat_id, services, input_tokens=10, output_tokens=2)
    await log_request(services.alone, values)
    await log_request(services.alone, values)
    requests, days = await stored(services, user)
    assert requests == [("fake/model-a", 12, 10, 2, None)]
    assert days == [("fake/model-a", values["started_at"].date(), 1, 10, 2, 0, 0)]

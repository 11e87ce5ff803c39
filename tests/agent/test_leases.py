"""Leases on both databases: partial rounds with their stop flags, renewals, and the sweep that
settles the turns of dead processes (and only those).

The test server's own sweep runs meanwhile; so these tests sweep as of `LATER`, and their
leases lapse before that but long after now, where the server's sweep never sees them lapsed.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

import pytest
from sqlalchemy import select, update

from app.agent import leases
from app.agent.leases import INTERRUPTED_CALL, INTERRUPTED_ROUND, INTERRUPTED_WAIT
from app.models import Chat, ChatLlmTool, Message
from app.services import Services
from tests.chat_rows import append
from tests.support import Client

pytestmark = pytest.mark.usefixtures("services")

LATER = timedelta(minutes=10)


async def chat_with(
    user: Client, services: Services, *, owner: str | None, lapsed_by: float = 1.0
) -> uuid.UUID:
    """A chat whose turn `owner` holds a lease that lapsed `lapsed_by` seconds before `LATER`
    (negative: that still holds then)."""
    chat_id = uuid.UUID((await user.post("/api/chats", json={})).json()["id"])
    until = services.clock.now() + LATER - timedelta(seconds=lapsed_by) if owner else None
    async with services.sessions() as db:
        await db.execute(
            update(Chat).where(Chat.id == chat_id).values(turn_owner=owner, turn_lease_until=until)
        )
        await db.commit()
    return chat_id


async def add_round(
    services: Services,
    chat_id: uuid.UUID,
    status: str,
    content: str,
    calls: tuple[str, ...] = (),
) -> int:
    now = services.clock.now()
    async with services.sessions() as db:
        await append(db, chat_id, role="user", content="q", status="ok", created_at=now)
        message = await append(
            db, chat_id, role="assistant", content=content, status=status, created_at=now
        )
        for n, call_status in enumerate(calls):
            db.add(
                ChatLlmTool(
                    chat_id=chat_id,
                    message_id=message.id,
                    tool_call_id=f"call-{n}",
                    name="list_files",
                    arguments={},
                    status=call_status,
                    created_at=now,
                    updated_at=now,
                )
            )
        await db.commit()
        return message.id


async def state(services: Services, chat_id: uuid.UUID) -> dict[str, object]:
    async with services.sessions() as db:
        chat = await db.get(Chat, chat_id)
        messages = (
            await db.execute(
                select(Message.status, Message.content, Message.error)
                .where(Message.chat_id == chat_id, Message.role == "assistant")
                .order_by(Message.id)
            )
        ).all()
        calls = (
            await db.execute(
                select(ChatLlmTool.status, ChatLlmTool.result)
                .where(ChatLlmTool.chat_id == chat_id)
                .order_by(ChatLlmTool.id)
            )
        ).all()
    assert chat is not None
    return {
        "owner": chat.turn_owner,
        "messages": [tuple(m) for m in messages],
        "calls": [tuple(c) for c in calls],
    }


async def sweep(services: Services, live: set[str] = frozenset()) -> list[uuid.UUID]:  # type: ignore[assignment]
    async with services.sessions() as db:
        settled = await leases.sweep(db, services.clock.now() + LATER, set(live))
        await db.commit()
    return settled


async def test_a_sweep_settles_a_dead_turn_keeping_its_text(
    user: Client, services: Services
) -> None:
    dead = await chat_with(user, services, owner="dead")
    await add_round(services, dead, "streaming", "Half of it", calls=("running", "pending", "done"))
    assert await sweep(services) == [dead]
    assert await state(services, dead) == {
        "owner": None,
        "messages": [("incomplete", "Half of it", INTERRUPTED_ROUND)],
        "calls": [
            ("cancelled", INTERRUPTED_CALL),
            ("cancelled", INTERRUPTED_WAIT),
            ("done", None),
        ],
    }
    assert await sweep(services) == []  # settled once


async def test_a_turn_that_died_between_rounds_is_not_left_looking_finished(
    user: Client, services: Services
) -> None:
    dead = await chat_with(user, services, owner="dead")
    await add_round(services, dead, "ok", "Let me look.", calls=("done",))
    assert await sweep(services) == [dead]
    state_after = await state(services, dead)
    assert state_after["messages"] == [("incomplete", "Let me look.", INTERRUPTED_ROUND)]
    assert state_after["calls"] == [("done", None)]


async def test_a_sweep_leaves_live_held_paused_and_finished_chats_alone(
    user: Client, services: Services
) -> None:
    holding = await chat_with(user, services, owner="alive-elsewhere", lapsed_by=-20)
    await add_round(services, holding, "streaming", "Still going")
    local = await chat_with(user, services, owner="mine")  # a clock jump made it look lapsed
    await add_round(services, local, "streaming", "Mine")
    paused = await chat_with(user, services, owner=None)
    await add_round(services, paused, "ok", "May I?", calls=("pending",))
    finished = await chat_with(user, services, owner="released-late")  # its release was lost
    await add_round(services, finished, "ok", "All done.")
    before = {c: await state(services, c) for c in (holding, local, paused, finished)}

    assert await sweep(services, live={"mine"}) == [finished]
    for chat_id in (holding, local, paused):
        assert await state(services, chat_id) == before[chat_id]
    assert await state(services, finished) == {**before[finished], "owner": None}


async def test_sweeps_at_once_settle_each_chat_once(user: Client, services: Services) -> None:
    dead = [await chat_with(user, services, owner=f"dead-{n}") for n in range(6)]
    for chat_id in dead:
        await add_round(services, chat_id, "streaming", "cut")
    first, second = await asyncio.gather(sweep(services), sweep(services))
    assert sorted(first + second) == sorted(dead)
    assert not set(first) & set(second)


async def test_partial_rounds_are_written_in_one_statement_that_tells_the_stop_flags(
    user: Client, services: Services
) -> None:
    asked = await chat_with(user, services, owner="asked", lapsed_by=-30)
    quiet = await chat_with(user, services, owner="quiet", lapsed_by=-30)
    streaming = await add_round(services, asked, "streaming", "")
    other = await add_round(services, quiet, "streaming", "")
    ended = await add_round(services, quiet, "ok", "The final word.")
    async with services.sessions() as db:
        assert await leases.request_stop(
            db, asked, (await db.get(Chat, asked)).user_id, services.clock.now()
        )  # type: ignore[union-attr]
        written, stopping = await leases.save_partial(
            db,
            [
                (streaming, "So far", "Thinking it over"),
                (other, "Other", None),
                (ended, "stale partial", None),
            ],
        )
        await db.commit()
    assert written == {streaming, other}
    assert stopping == {"asked"}
    assert (await state(services, asked))["messages"] == [("streaming", "So far", None)]
    async with services.sessions() as db:
        reasoning = await db.scalar(select(Message.reasoning).where(Message.id == streaming))
    assert reasoning == "Thinking it over"
    assert (await state(services, quiet))["messages"] == [
        ("streaming", "Other", None),
        ("ok", "The final word.", None),
    ]


async def test_renewal_tells_which_owners_still_hold_their_chat(
    user: Client, services: Services
) -> None:
    await chat_with(user, services, owner="holder", lapsed_by=-5)
    async with services.sessions() as db:
        renewed = await leases.renew(
            db, ["holder", "lost"], services.clock.now(), timedelta(seconds=30)
        )
        await db.commit()
    assert renewed == {"holder"}

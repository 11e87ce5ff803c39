"""One turn per chat at a time, across every worker process: a lease in the chats table.

Acquiring is one conditional UPDATE (the chat is free, or its lease has lapsed), so two
processes racing for a chat can't both win, on SQLite or PostgreSQL. The owner renews the
lease while the turn runs; a process that dies stops renewing and its lease lapses after
`HEARTH_TURN_LEASE_SECONDS`, and every worker's sweeper (`sweep`) then settles what that turn
left open, so nothing stays `streaming` waiting for someone to write in the chat. A stop request
is a flag on the same row, which the owning process polls, so `/stop` works whichever worker
receives it.
"""

from __future__ import annotations

import functools
import uuid
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Update, bindparam, case, exists, func, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.sql.elements import ColumnElement

from app.core.db.engine import rows_changed
from app.core.db.types import UTCDateTime
from app.models import Chat, ChatLlmTool, Message


def free(now: datetime | ColumnElement[datetime]) -> ColumnElement[bool]:
    return or_(Chat.turn_lease_until.is_(None), Chat.turn_lease_until < now)


_ACQUIRE = (
    update(Chat)
    .where(
        Chat.id == bindparam("chat_id"),
        Chat.user_id == bindparam("of_user"),
        free(bindparam("now", type_=UTCDateTime)),
    )
    .values(
        turn_owner=bindparam("owner"),
        turn_lease_until=bindparam("lease_until"),
        turn_stop_requested=False,
    )
    .execution_options(synchronize_session=False)
)
_ACQUIRE_FOR_MESSAGE = _ACQUIRE.where(
    ~exists().where(ChatLlmTool.chat_id == bindparam("chat_id"), ChatLlmTool.status == "pending")
).values(updated_at=bindparam("now"), title=func.coalesce(Chat.title, bindparam("new_title")))
_RELEASE = (
    update(Chat)
    .where(Chat.id == bindparam("of_chat"), Chat.turn_owner == bindparam("owner"))
    .values(
        turn_owner=None,
        turn_lease_until=None,
        turn_stop_requested=False,
        updated_at=bindparam("now"),
    )
)
"""Built once, as every statement a turn runs on its way (`app.chats.repository` says why).
An UPDATE's parameters are named apart from its table's columns, which SQLAlchemy reserves."""


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
    values = _acquiring(chat_id, user_id, owner, now, lease)
    if for_message:
        values["new_title"] = title
    statement = _ACQUIRE_FOR_MESSAGE if for_message else _ACQUIRE
    return bool(await rows_changed(db, statement, values))


def _acquiring(
    chat_id: uuid.UUID, user_id: uuid.UUID, owner: str, now: datetime, lease: timedelta
) -> dict[str, Any]:
    """The values of `_ACQUIRE` and the statements built on it."""
    return {
        "chat_id": chat_id,
        "of_user": user_id,
        "now": now,
        "owner": owner,
        "lease_until": now + lease,
    }


CLAIM_FOR_MESSAGE = _ACQUIRE_FOR_MESSAGE.where(Chat.turn_owner.is_(None))
"""`acquire(for_message=True)` of a chat no turn holds or left behind: what `claim_for_message`
runs, and what `app.chats.repository` builds the whole of a send on."""
_CLAIM_FOR_MESSAGE = CLAIM_FOR_MESSAGE.returning(Chat).execution_options(populate_existing=True)


async def claim_for_message(db: AsyncSession, claim: dict[str, Any]) -> Chat | None:
    """`acquire(for_message=True)` of a chat that no turn holds or left behind (its owner is
    null), with `claim_values`, returning the chat as the statement left it: sending reads and
    takes the chat in one statement. None for any other chat (not the user's, held, or left by
    a dead turn whose leftovers need settling first): the caller then reads it and goes the
    long way (`app.chats.service`)."""
    return await db.scalar(_CLAIM_FOR_MESSAGE, claim)


def claim_values(
    chat_id: uuid.UUID,
    user_id: uuid.UUID,
    owner: str,
    now: datetime,
    lease: timedelta,
    *,
    title: str | None,
) -> dict[str, Any]:
    """The bound values of `CLAIM_FOR_MESSAGE`, and of what is built on it."""
    return {**_acquiring(chat_id, user_id, owner, now, lease), "new_title": title}


INTERRUPTED_ROUND = "This answer was cut off: the hearth worker writing it stopped before the end."
INTERRUPTED_CALL = "The tool call did not finish: the hearth worker running it stopped."
INTERRUPTED_WAIT = "The tool call was not run: the hearth worker resuming the turn stopped first."


async def settle(
    db: AsyncSession, chat_id: uuid.UUID, now: datetime, *, pending: bool = True
) -> None:
    """Close what the turn of a dead process left open; call it holding the chat's lease.

    A round still `streaming` becomes `incomplete`, keeping the text it had when it stopped; a
    tool call still `running` (and, with `pending`, one a resumed turn had not yet run) becomes
    `cancelled`, which the builder replays to the model as interrupted; and a turn that died
    between two rounds (its last round's calls all answered, no round after them) gets its last
    round (the active leaf) marked `incomplete`, so the stored chat never shows a turn that
    ended well when it did not. A turn that answers the user's approvals passes
    `pending=False`: the calls waiting for them are its own.
    """
    await db.execute(
        update(Message)
        .where(Message.chat_id == chat_id, Message.status == "streaming")
        .values(status="incomplete", error=INTERRUPTED_ROUND)
    )
    await db.execute(
        update(ChatLlmTool)
        .where(ChatLlmTool.chat_id == chat_id, ChatLlmTool.status == "running")
        .values(status="cancelled", result=INTERRUPTED_CALL, updated_at=now)
    )
    if pending:
        await db.execute(
            update(ChatLlmTool)
            .where(ChatLlmTool.chat_id == chat_id, ChatLlmTool.status == "pending")
            .values(status="cancelled", result=INTERRUPTED_WAIT, updated_at=now)
        )
    last = select(Chat.active_leaf_id).where(Chat.id == chat_id).scalar_subquery()
    await _unfinish(db, last)


async def _unfinish(db: AsyncSession, last: Any) -> None:
    """Mark `last` `incomplete` if it is an assistant round that looks finished but is not: `ok`
    with its calls answered (none waiting for approval) and no round after them."""
    calls = exists().where(ChatLlmTool.message_id == Message.id)
    waiting = exists().where(ChatLlmTool.message_id == Message.id, ChatLlmTool.status == "pending")
    await db.execute(
        update(Message)
        .where(
            Message.id == last,
            Message.role == "assistant",
            Message.status == "ok",
            Message.error.is_(None),
            calls,
            ~waiting,
        )
        .values(status="incomplete", error=INTERRUPTED_ROUND)
        .execution_options(synchronize_session=False)
    )


async def settle_own(
    db: AsyncSession, rounds: list[int], running: list[int], now: datetime
) -> None:
    """`settle` for a live turn that lost its chat's lease, on its own rows only.

    Its process stalled past the lease, so a sweep may have settled the chat already (this
    then changes nothing) or may not have yet, and the turn went on meanwhile: a round it
    closed or a call it started after the sweep is closed here the way the sweep would have.
    Another turn may hold the chat by now, so nothing but these rounds and calls is touched.
    """
    if not rounds:
        return
    await db.execute(
        update(Message)
        .where(Message.id.in_(rounds), Message.status == "streaming")
        .values(status="incomplete", error=INTERRUPTED_ROUND)
    )
    if running:
        await db.execute(
            update(ChatLlmTool)
            .where(ChatLlmTool.id.in_(running), ChatLlmTool.status == "running")
            .values(status="cancelled", result=INTERRUPTED_CALL, updated_at=now)
        )
    await _unfinish(db, rounds[-1])


async def sweep(
    db: AsyncSession, now: datetime, live: set[str], limit: int = 100
) -> list[uuid.UUID]:
    """Settle chats whose lease lapsed with its owner gone; the chats settled.

    Each is claimed by clearing its lease where the lapsed owner still holds it, so a turn that
    took the chat over meanwhile is left alone; on PostgreSQL the chats are read `FOR UPDATE
    SKIP LOCKED`, so the workers sweeping at once share them out rather than wait for each other.
    Owners in `live` are this process's own (a clock jump may make their lease look lapsed).
    """
    lapsed = (
        await db.execute(
            select(Chat.id, Chat.turn_owner)
            .where(Chat.turn_owner.is_not(None), Chat.turn_lease_until < now)
            .order_by(Chat.turn_lease_until)
            .limit(limit)
            .with_for_update(skip_locked=True)
        )
    ).all()
    settled = []
    for chat_id, owner in lapsed:
        if owner in live:
            continue
        claimed = await rows_changed(
            db,
            update(Chat)
            .where(Chat.id == chat_id, Chat.turn_owner == owner, Chat.turn_lease_until < now)
            .values(turn_owner=None, turn_lease_until=None, turn_stop_requested=False)
            .execution_options(synchronize_session=False),
        )
        if claimed:
            await settle(db, chat_id, now)
            settled.append(chat_id)
    return settled


async def renew(db: AsyncSession, owners: list[str], now: datetime, lease: timedelta) -> set[str]:
    """Extend the leases `owners` hold; the owners that still held theirs."""
    if not owners:
        return set()
    renewed = await db.scalars(
        update(Chat)
        .where(Chat.turn_owner.in_(owners))
        .values(turn_lease_until=now + lease)
        .returning(Chat.turn_owner)
        .execution_options(synchronize_session=False)
    )
    return {owner for owner in renewed if owner is not None}


async def release(db: AsyncSession, chat_id: uuid.UUID, owner: str, now: datetime) -> None:
    await db.execute(_RELEASE, {"of_chat": chat_id, "owner": owner, "now": now})


@functools.cache
def release_after(closing: tuple[Update, ...]) -> Update:
    """The release of a chat (values `of_chat`, `owner`, `now`) with the updates `closing`
    ahead of it in the same statement, as data-modifying CTEs (PostgreSQL), which run whether
    or not the release reads them: one round trip where a transaction of them takes two more
    for each update, and the `BEGIN` and `COMMIT` (`bench/turn_writes.py` counts them).
    Built once per combination: a turn's end has a few."""
    return _RELEASE.add_cte(*(update.cte(f"closing_{i}") for i, update in enumerate(closing)))


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


PARTIAL_BATCH = 1000
"""Rounds per statement at most (three parameters each, well within either engine's limit)."""


async def save_partial(
    db: AsyncSession, rounds: list[tuple[int, str, str | None]]
) -> tuple[set[int], set[str]]:
    """Write the partial text of streaming rounds, in one statement, which also tells which of
    their chats were asked to stop: the supervisor's tick is then one statement, not two.

    Returns the rows written (a round that has ended meanwhile keeps its own last write:
    `streaming` rows only) and the owners of their chats whose stop flag is set.
    """
    written: set[int] = set()
    stopping: set[str] = set()
    for start in range(0, len(rounds), PARTIAL_BATCH):
        batch = rounds[start : start + PARTIAL_BATCH]
        ids = [row for row, _, _ in batch]
        asked = (
            select(Chat.turn_owner)
            .where(Chat.id == Message.chat_id, Chat.turn_stop_requested)
            .scalar_subquery()
        )
        result = await db.execute(
            update(Message)
            .where(Message.id.in_(ids), Message.status == "streaming")
            .values(
                content=case({row: text for row, text, _ in batch}, value=Message.id),
                reasoning=case({row: thought for row, _, thought in batch}, value=Message.id),
            )
            .returning(Message.id, asked)
            .execution_options(synchronize_session=False)
        )
        for row, owner in result:
            written.add(row)
            if owner is not None:
                stopping.add(owner)
    return written, stopping

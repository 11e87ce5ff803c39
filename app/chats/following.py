"""Following a chat's running turn from another request: a reload, another tab, another worker.

The chat is read as the user's (a foreign or unknown chat is a 404) together with its turn lease,
on the request's connection as authentication read it (one statement alone, no transaction and
no session of its own), with one prebuilt statement (building it for each reader cost 67 us,
measured).
A turn of this process is followed in its log directly, whatever its lease says (it may just have
released the chat, its last events still to be read). A lease that is free or lapsed means no
turn runs (204: the stored chat is the truth). A live lease held elsewhere is followed through the
relay (`app.agent.relay`, PostgreSQL); without one (SQLite, one process) the lease's owner is this
process, whose turn may be starting, so its log is awaited for a moment.
"""

from __future__ import annotations

import uuid
from typing import Final

from sqlalchemy import bindparam, select
from sqlalchemy.ext.asyncio import AsyncConnection

from app.agent.live import Reader
from app.core.errors import NotFound
from app.models import Chat
from app.services import Services

CHAT_NOT_FOUND = "chat not found"
STARTING_SECONDS: Final = 5.0
"""How long a reader waits for a turn whose lease is taken but which has not started yet."""

_LEASE = select(Chat.turn_owner, Chat.turn_lease_until).where(
    Chat.id == bindparam("chat_id"), Chat.user_id == bindparam("user_id")
)


async def follow_turn(
    services: Services,
    connection: AsyncConnection,
    user_id: uuid.UUID,
    chat_id: uuid.UUID,
    after: int,
) -> Reader | None:
    """A reader of the chat's running turn, from the event after number `after`; None when no
    turn runs."""
    row = (await connection.execute(_LEASE, {"chat_id": chat_id, "user_id": user_id})).one_or_none()
    await connection.rollback()  # a stream may last for minutes: it holds no transaction
    if row is None:
        raise NotFound(CHAT_NOT_FOUND)
    turns = services.turns
    log = turns.live.get(chat_id)
    if log is not None:
        return log.follow(after)
    owner, until = row
    if owner is None or until is None or until < services.clock.now():
        return None
    if turns.relay is not None:
        return await turns.relay.follow(chat_id, owner, after)
    log = await turns.live.wait_for(chat_id, owner, STARTING_SECONDS)
    return log.follow(after) if log is not None else None

"""Following a chat's running turn from another request: a reload, another tab, another worker.

The chat is read as the user's (a foreign or unknown chat is a 404) together with its turn lease,
beside the user in authentication's own statement (`LEASE`, read `Alongside`): a reader's request
is one statement, on a connection given back before the reader waits for anything.
A turn of this process is followed in its log directly, whatever its lease says (it may just have
released the chat, its last events still to be read). A lease that is free or lapsed means no
turn runs (204: the stored chat is the truth). A live lease held elsewhere is followed through the
relay (`app.agent.relay`, PostgreSQL); without one (SQLite, one process) the lease's owner is this
process, whose turn may be starting, so its log is awaited for a moment.
"""

from __future__ import annotations

import uuid
from typing import Any, Final

from sqlalchemy import and_, bindparam

from app.agent.live import Reader
from app.auth.sessions import Alongside
from app.core.errors import NotFound
from app.models import Chat, User
from app.services import Services

CHAT_NOT_FOUND = "chat not found"
STARTING_SECONDS: Final = 5.0
"""How long a reader waits for a turn whose lease is taken but which has not started yet."""

LEASE = Alongside(
    columns=(Chat.id, Chat.turn_owner, Chat.turn_lease_until),
    table=Chat.__table__,
    on=and_(Chat.id == bindparam("chat_id"), Chat.user_id == User.id),
)
"""The chat `chat_id` (a bound value) if the user owns it, and its turn lease."""


async def follow_turn(
    services: Services, chat_id: uuid.UUID, lease: tuple[Any, ...], after: int
) -> Reader | None:
    """A reader of the chat's running turn, from the event after number `after`; None when no
    turn runs. `lease` is what `LEASE` read."""
    found, owner, until = lease
    if found is None:
        raise NotFound(CHAT_NOT_FOUND)
    turns = services.turns
    log = turns.live.get(chat_id)
    if log is not None:
        return log.follow(after)
    if owner is None or until is None or until < services.clock.now():
        return None
    if turns.relay is not None:
        return await turns.relay.follow(chat_id, owner, after)
    log = await turns.live.wait_for(chat_id, owner, STARTING_SECONDS)
    return log.follow(after) if log is not None else None

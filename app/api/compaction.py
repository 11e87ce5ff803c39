"""`POST /api/chats/{id}/compact`: a summary on request.

The chat's turn lease is held while the summary is made, and renewed by the turn supervisor
for as long as the summary request runs, so no turn starts meanwhile (and none may be running:
409). A summary request that fails answers 502 with the provider's answer, or a plain sentence
when the failure was not one, and leaves the chat as it was.
"""

from __future__ import annotations

import uuid

from fastapi import APIRouter, HTTPException
from pydantic import BaseModel

from app.agent import approvals, leases
from app.agent.summaries import NothingToCover, SummaryFailed, summarise
from app.api.chats import usable_model
from app.api.deps import Auth, DbSession, ServicesDep
from app.chats import repository
from app.core.errors import unprocessable
from app.core.http.schemas import error_responses

router = APIRouter(prefix="/api/chats", tags=["chats"])


class CompactOut(BaseModel):
    summary_id: int
    covers_up_to_message_id: int


@router.post(
    "/{chat_id}/compact",
    response_model=CompactOut,
    responses=error_responses(401, 403, 404, 409, 502),
)
async def compact_chat(
    chat_id: uuid.UUID, auth: Auth, services: ServicesDep, db: DbSession
) -> CompactOut:
    """Summarise the chat's older messages now; the model gets the summary instead of them."""
    chat = await repository.get_chat(db, auth.user.id, chat_id)
    if chat is None:
        raise HTTPException(404, "chat not found")
    model = services.registry.get(usable_model(services, chat.model))
    assert model is not None
    if await approvals.has_pending(db, chat_id):
        raise HTTPException(409, "the turn waits for approvals: answer them, or stop the turn")
    owner = services.turns.new_owner()
    now = services.clock.now()
    if not await leases.acquire(db, chat_id, auth.user.id, owner, now, services.turns.lease):
        raise HTTPException(409, "a turn is running in this chat")
    await db.commit()
    try:
        async with services.turns.holding(owner):
            made = await summarise(services, chat_id, model)
    except NothingToCover:
        raise unprocessable(
            ("path", "chat_id"), "nothing to summarise: the chat is within the kept window"
        ) from None
    except SummaryFailed as exc:
        raise HTTPException(502, f"the summary request failed: {exc}") from None
    finally:
        await leases.release(db, chat_id, owner, services.clock.now())
        await db.commit()
    return CompactOut(summary_id=made.id, covers_up_to_message_id=made.covers_up_to_message_id)

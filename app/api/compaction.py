"""`POST /api/chats/{id}/compact`: a summary on request.

The chat's turn lease is held while the summary is made, and renewed by the turn supervisor
for as long as the summary request runs, so no turn starts meanwhile (and none may be running:
409). A summary request that fails answers 502 with the provider's answer, or a plain sentence
when the failure was not one, and leaves the chat as it was.
"""

from __future__ import annotations

import uuid

from fastapi import APIRouter

from app.api.deps import Auth, DbSession, ServicesDep
from app.chats import service
from app.chats.schemas import CompactOut
from app.core.http.schemas import error_responses

router = APIRouter(prefix="/api/chats", tags=["chats"])


@router.post(
    "/{chat_id}/compact",
    response_model=CompactOut,
    responses=error_responses(401, 403, 404, 409, 429, 502),
)
async def compact_chat(
    chat_id: uuid.UUID, auth: Auth, services: ServicesDep, db: DbSession
) -> CompactOut:
    """Summarise the chat's older messages now; the model gets the summary instead of them."""
    made = await service.compact(services, db, auth.user.id, chat_id, quota=auth.user.quota)
    return CompactOut(summary_id=made.id, covers_up_to_message_id=made.covers_up_to_message_id)

"""Branches: a new answer to a user message, and switching the branch a chat shows.

Editing a message is no route of its own: it is a send (`POST /messages`) with the edited
message's `parent_id`. Regenerating answers with the same kind of stream as a send.
"""

from __future__ import annotations

import uuid

from fastapi import APIRouter, Response
from fastapi.responses import StreamingResponse

from app.api.deps import Auth, DbSession, ServicesDep
from app.api.event_stream import EventStreamResponse
from app.api.stream_schema import STREAM_RESPONSE
from app.chats import service
from app.chats.schemas import ActiveIn, ChatDetailOut, RegenerateIn
from app.core.http.json import json_response
from app.core.http.schemas import error_responses

router = APIRouter(prefix="/api/chats", tags=["messages"])


@router.post(
    "/{chat_id}/regenerate",
    response_class=StreamingResponse,
    responses={**STREAM_RESPONSE, **error_responses(401, 403, 404, 409, 429)},
)
async def regenerate(
    chat_id: uuid.UUID, body: RegenerateIn, auth: Auth, services: ServicesDep, db: DbSession
) -> StreamingResponse:
    """A new answer to a user message of the chat; the old answer stays as its sibling."""
    turn = await service.regenerate(
        services, db, auth.user.id, chat_id, body.message_id, body.model, quota=auth.user.quota
    )
    return EventStreamResponse(turn.listen())


@router.put(
    "/{chat_id}/active",
    response_model=ChatDetailOut,
    responses=error_responses(401, 403, 404, 409),
)
async def switch_branch(
    chat_id: uuid.UUID, body: ActiveIn, auth: Auth, services: ServicesDep, db: DbSession
) -> Response:
    """Show the branch through a message: the newest leaf under it becomes the active leaf."""
    await service.switch_branch(services, db, auth.user.id, chat_id, body.message_id)
    connection = await db.connection()
    return json_response(await service.chat_detail(services, connection, auth.user.id, chat_id))

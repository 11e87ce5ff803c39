"""Sending a message (a streamed turn) and stopping the running turn."""

from __future__ import annotations

import uuid

from fastapi import APIRouter
from fastapi.responses import StreamingResponse

from app.api.deps import Auth, Connection, DbSession, ServicesDep
from app.api.event_stream import EventStreamResponse
from app.api.stream_schema import STREAM_RESPONSE
from app.chats import service
from app.chats.schemas import MessageIn, StopOut
from app.core.http.schemas import error_responses

router = APIRouter(prefix="/api/chats", tags=["messages"])


@router.post(
    "/{chat_id}/messages",
    response_class=StreamingResponse,
    responses={**STREAM_RESPONSE, **error_responses(401, 403, 404, 409, 429)},
)
async def send_message(
    chat_id: uuid.UUID,
    body: MessageIn,
    auth: Auth,
    services: ServicesDep,
    connection: Connection,
) -> StreamingResponse:
    """Store the message and stream the model's turn that answers it.

    `parent_id` left out continues the active branch; an id (the last message of a finished
    turn) or `null` (a new root) starts another one: an edit is a send under the edited
    message's parent."""
    parent: service.Parent = (
        body.parent_id if "parent_id" in body.model_fields_set else service.ACTIVE
    )
    turn = await service.send_message(
        services,
        connection,
        auth.user.id,
        chat_id,
        body.content,
        body.attachments,
        body.model,
        parent,
        quota=auth.user.quota,
    )
    return EventStreamResponse(turn.listen())


@router.post(
    "/{chat_id}/stop",
    status_code=202,
    response_model=StopOut,
    responses=error_responses(401, 403, 404, 409),
)
async def stop_turn(
    chat_id: uuid.UUID, auth: Auth, services: ServicesDep, db: DbSession
) -> StopOut:
    """Stop the chat's running turn: the model request is cancelled, partial text kept.

    A turn paused for approvals ends here: its pending calls are cancelled."""
    return StopOut(status=await service.stop_turn(services, db, auth.user.id, chat_id))

"""Following a running turn: `GET /api/chats/{chat_id}/stream`, for a reload, another tab, a
dropped connection (with `Last-Event-ID`) or the AI SDK's `resumeStream()`."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Header, Response
from fastapi.responses import StreamingResponse

from app.api.deps import Auth, Connection, ServicesDep
from app.api.event_stream import EventStreamResponse
from app.api.stream_schema import STREAM_RESPONSE
from app.chats.following import follow_turn
from app.core.errors import Invalid
from app.core.http.schemas import error_responses

router = APIRouter(prefix="/api/chats", tags=["messages"])

MAX_EVENT_ID = 2**53
"""Event numbers are far below this; a larger `Last-Event-ID` is no event of any turn."""


def event_number(header: str | None) -> int:
    """The number in a `Last-Event-ID` header (0 without one)."""
    if header is None or not header.strip():
        return 0
    value = header.strip()
    if not value.isascii() or not value.isdigit() or int(value) > MAX_EVENT_ID:
        raise Invalid(("header", "last-event-id"), "Last-Event-ID must be an event number")
    return int(value)


@router.get(
    "/{chat_id}/stream",
    response_class=StreamingResponse,
    responses={
        **STREAM_RESPONSE,
        204: {"description": "No turn runs in the chat: the stored chat is all there is."},
        **error_responses(401, 404),
    },
)
async def follow(
    chat_id: uuid.UUID,
    auth: Auth,
    services: ServicesDep,
    connection: Connection,
    last_event_id: Annotated[str | None, Header(max_length=64)] = None,
) -> Response:
    """The chat's running turn as the client that started it reads it: every event from its
    `start` (after event n with `Last-Event-ID: n`), then its live events, up to `[DONE]`."""
    after = event_number(last_event_id)
    reader = await follow_turn(services, connection, auth.user.id, chat_id, after)
    if reader is None:
        return Response(status_code=204)
    return EventStreamResponse(reader, readers=services.metrics)

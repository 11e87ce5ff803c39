"""Following a running turn: `GET /api/chats/{chat_id}/stream`, for a reload, another tab, a
dropped connection (with `Last-Event-ID`) or the AI SDK's `resumeStream()`.

Every reader of every turn makes this request, so it is the one route that reads its user
itself instead of through `Auth` and `Connection`: FastAPI solves a route's dependencies anew on
each request (a generator dependency with an exit stack and a shielded exit), which cost this
request 290 us of its 1,770 of server CPU (measured on PostgreSQL, alternated with the
dependencies' version). What it does is theirs: the same authentication (`deps.authenticate`,
with the chat's lease read in its statement), on a pooled connection given back before the
stream begins.
"""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Header, Request, Response
from fastapi.responses import StreamingResponse

from app.api.deps import authenticate
from app.api.event_stream import EventStreamResponse
from app.api.stream_schema import STREAM_RESPONSE
from app.chats.following import LEASE, follow_turn
from app.core.db.engine import statements_alone
from app.core.errors import Invalid
from app.core.http.schemas import error_responses
from app.services import Services

router = APIRouter(prefix="/api/chats", tags=["messages"])

MAX_EVENT_ID = 2**53
"""Event numbers are far below this; a larger `Last-Event-ID` is no event of any turn."""
MAX_EVENT_ID_CHARACTERS = 64
"""A longer header is refused before its digits are read."""


def event_number(header: str | None) -> int:
    """The number in a `Last-Event-ID` header (0 without one). Checked after authentication,
    so a client that is not signed in learns only that (401), whatever the header says."""
    if header is None or not header.strip():
        return 0
    value = header.strip()
    if (
        len(value) > MAX_EVENT_ID_CHARACTERS
        or not value.isascii()
        or not value.isdigit()
        or int(value) > MAX_EVENT_ID
    ):
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
    request: Request,
    last_event_id: Annotated[str | None, Header()] = None,
) -> Response:
    """The chat's running turn as the client that started it reads it: every event from its
    `start` (after event n with `Last-Event-ID: n`), then its live events, up to `[DONE]`."""
    services: Services = request.app.state.services
    async with services.engine.connect() as connection:
        await statements_alone(connection)
        auth = await authenticate(request, connection, LEASE, {"chat_id": chat_id})
    after = event_number(last_event_id)
    reader = await follow_turn(services, chat_id, auth.alongside, after)
    if reader is None:
        return Response(status_code=204)
    return EventStreamResponse(reader, readers=services.metrics)

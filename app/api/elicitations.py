"""Answering the form a call's MCP server asked the user for (`data-elicitation`).

The answer is stored on the call, so any worker takes it. In the process that runs the turn the
call wakes at once and the response is the rest of the turn, the same kind of stream as a
message's; a turn that runs in another worker reads the answer from the call's row, and this
response is a 202 with the answer as stored.
"""

from __future__ import annotations

import uuid

from fastapi import APIRouter
from fastapi.responses import JSONResponse, StreamingResponse

from app.api.deps import Auth, DbSession, ServicesDep
from app.api.event_stream import EventStreamResponse
from app.api.stream_schema import STREAM_RESPONSE
from app.chats import service
from app.chats.schemas import ElicitationAnsweredOut, ElicitationIn
from app.core.http.schemas import error_responses

router = APIRouter(prefix="/api/chats", tags=["messages"])


@router.post(
    "/{chat_id}/elicitations",
    response_class=StreamingResponse,
    response_model=None,
    responses={
        **STREAM_RESPONSE,
        202: {
            "model": ElicitationAnsweredOut,
            "description": "Stored; the turn runs in another worker, which takes it from there",
        },
        **error_responses(401, 403, 404, 409),
    },
)
async def answer_elicitation(
    chat_id: uuid.UUID, body: ElicitationIn, auth: Auth, services: ServicesDep, db: DbSession
) -> StreamingResponse | JSONResponse:
    """Accept (with the form's content), decline or cancel what a tool's server asked."""
    answered = await service.answer_elicitation(
        services, db, auth.user.id, chat_id, body.elicitation_id, body.action, body.content
    )
    if isinstance(answered, service.Elicited):
        out = ElicitationAnsweredOut(elicitation_id=body.elicitation_id, action=answered.action)
        return JSONResponse(out.model_dump(), status_code=202)
    return EventStreamResponse(answered.listen())

"""Answering the calls a paused turn waits for.

Decisions may come in several requests. Each is stored on its call at once; the request that
answers the last pending call takes the chat's turn lease and resumes the turn, answering with
the same kind of stream as a message (its continuation only). The others answer 202 with what
still waits.
"""

from __future__ import annotations

import uuid

from fastapi import APIRouter
from fastapi.responses import JSONResponse, StreamingResponse

from app.api.deps import Auth, DbSession, ServicesDep
from app.api.event_stream import EventStreamResponse
from app.api.stream_schema import STREAM_RESPONSE
from app.chats import service
from app.chats.schemas import ApprovalsIn, WaitingOut
from app.core.http.schemas import error_responses

router = APIRouter(prefix="/api/chats", tags=["messages"])


@router.post(
    "/{chat_id}/approvals",
    response_class=StreamingResponse,
    response_model=None,
    responses={
        **STREAM_RESPONSE,
        202: {"model": WaitingOut, "description": "Stored; other calls still wait"},
        **error_responses(401, 403, 404, 409, 429),
    },
)
async def answer_approvals(
    chat_id: uuid.UUID, body: ApprovalsIn, auth: Auth, services: ServicesDep, db: DbSession
) -> StreamingResponse | JSONResponse:
    """Approve or reject pending tool calls; the last answer resumes the paused turn."""
    decisions = [service.Decision(d.tool_call_id, d.approved, d.note) for d in body.decisions]
    resumed = await service.answer_approvals(
        services, db, auth.user.id, chat_id, decisions, quota=auth.user.quota
    )
    if isinstance(resumed, list):
        return JSONResponse({"pending": resumed}, status_code=202)
    return EventStreamResponse(resumed.listen())

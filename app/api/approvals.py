"""Answering the calls a paused turn waits for.

Decisions may come in several requests. Each is stored on its call at once; the request that
answers the last pending call takes the chat's turn lease and resumes the turn, answering with
the same kind of stream as a message (its continuation only). The others answer 202 with what
still waits.
"""

from __future__ import annotations

import uuid

from fastapi import APIRouter, HTTPException
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, Field, StrictBool

from app.agent import approvals, leases
from app.agent.stream import STREAM_HEADERS
from app.agent.turn import TurnPlan
from app.api.chats import usable_model
from app.api.deps import Auth, DbSession, ServicesDep
from app.api.stream_schema import STREAM_RESPONSE
from app.chats import repository
from app.core.errors import unprocessable
from app.core.http.schemas import RequestBody, error_responses
from app.models import Message

router = APIRouter(prefix="/api/chats", tags=["messages"])


class DecisionIn(RequestBody):
    tool_call_id: str = Field(min_length=1, max_length=200)
    """As the model sent it (the `approvalId` of the stream's approval request)."""
    approved: StrictBool
    note: str | None = Field(default=None, max_length=10_000)
    """Why, for a rejection: the model reads it."""


class ApprovalsIn(RequestBody):
    decisions: list[DecisionIn] = Field(min_length=1, max_length=100)


class WaitingOut(BaseModel):
    pending: list[str]
    """The tool call ids that still wait for a decision."""


@router.post(
    "/{chat_id}/approvals",
    response_class=StreamingResponse,
    response_model=None,
    responses={
        **STREAM_RESPONSE,
        202: {"model": WaitingOut, "description": "Stored; other calls still wait"},
        **error_responses(401, 403, 404, 409),
    },
)
async def answer_approvals(
    chat_id: uuid.UUID, body: ApprovalsIn, auth: Auth, services: ServicesDep, db: DbSession
) -> StreamingResponse | JSONResponse:
    """Approve or reject pending tool calls; the last answer resumes the paused turn."""
    chat = await repository.get_chat(db, auth.user.id, chat_id)
    if chat is None:
        raise HTTPException(404, "chat not found")
    ids = [d.tool_call_id for d in body.decisions]
    if len(set(ids)) != len(ids):
        raise unprocessable(("body", "decisions"), "each tool_call_id may appear once")
    pending = {call.tool_call_id: call for call in await approvals.pending_calls(db, chat_id)}
    unknown = [i for i in ids if i not in pending]
    if unknown:
        raise HTTPException(404, f"no pending tool call {unknown[0]!r} in this chat")
    now = services.clock.now()
    for decision in body.decisions:
        row = pending[decision.tool_call_id].row_id
        await approvals.record_decision(db, row, decision.approved, decision.note, now)
    await db.commit()

    calls = await approvals.pending_calls(db, chat_id)
    waiting = [call.tool_call_id for call in calls if call.decision is None]
    if waiting or not calls:
        return JSONResponse({"pending": waiting}, status_code=202)
    round_model = await db.get(Message, calls[0].message_id)
    model = services.registry.get(
        usable_model(services, round_model.model if round_model else chat.model)
    )
    assert model is not None
    owner = services.turns.new_owner()
    if not await leases.acquire(db, chat_id, auth.user.id, owner, now, services.turns.lease):
        # Another request answering at the same moment resumed the turn.
        await db.rollback()
        return JSONResponse({"pending": []}, status_code=202)
    # Read again holding the lease: every decision, whichever request stored it.
    calls = await approvals.pending_calls(db, chat_id)
    question = await approvals.question_of(db, chat_id, calls[0].message_id)
    await db.commit()
    turn = services.turns.launch(
        TurnPlan(
            owner=owner,
            user_id=auth.user.id,
            chat_id=chat_id,
            user_message_id=question,
            model=model,
            resume=approvals.deferred_results(calls),
        )
    )
    return StreamingResponse(turn.listen(), media_type="text/event-stream", headers=STREAM_HEADERS)

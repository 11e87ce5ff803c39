"""Sending a message (a streamed turn) and stopping the running turn."""

from __future__ import annotations

import uuid

from fastapi import APIRouter, HTTPException
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, Field
from sqlalchemy import func, select

from app.agent import approvals, leases
from app.agent.capabilities.recorder import round_row
from app.agent.stream import STREAM_HEADERS
from app.agent.turn import TurnPlan
from app.api.chats import usable_model
from app.api.deps import Auth, DbSession, ServicesDep
from app.api.stream_schema import STREAM_RESPONSE
from app.chats import repository
from app.core.errors import unprocessable
from app.core.http.schemas import RequestBody, error_responses
from app.models import Message, Upload

router = APIRouter(prefix="/api/chats", tags=["messages"])

TITLE_LENGTH = 80


class MessageIn(RequestBody):
    content: str = Field(default="", max_length=200_000)
    attachments: list[uuid.UUID] = Field(default_factory=list, max_length=20)
    model: str | None = Field(default=None, min_length=1, max_length=300)
    """A model for this turn only; the chat's model otherwise."""


class StopOut(BaseModel):
    status: str


def title_from(content: str) -> str | None:
    first = next((line.strip() for line in content.splitlines() if line.strip()), "")
    return first[:TITLE_LENGTH] or None


@router.post(
    "/{chat_id}/messages",
    response_class=StreamingResponse,
    responses={**STREAM_RESPONSE, **error_responses(401, 403, 404, 409)},
)
async def send_message(
    chat_id: uuid.UUID, body: MessageIn, auth: Auth, services: ServicesDep, db: DbSession
) -> StreamingResponse:
    """Store the message and stream the model's turn that answers it."""
    chat = await repository.get_chat(db, auth.user.id, chat_id)
    if chat is None:
        raise HTTPException(404, "chat not found")
    if not body.content.strip() and not body.attachments:
        raise unprocessable(("body", "content"), "a message needs content or an attachment")
    model = services.registry.get(usable_model(services, body.model or chat.model))
    assert model is not None
    attachments = list(dict.fromkeys(body.attachments))
    if attachments:
        owned = await db.scalar(
            select(func.count())
            .select_from(Upload)
            .where(Upload.user_id == auth.user.id, Upload.id.in_(attachments))
        )
        if owned != len(attachments):
            raise HTTPException(404, "upload not found")

    now = services.clock.now()
    owner = services.turns.new_owner()
    previous_owner = chat.turn_owner
    title = title_from(body.content) if chat.title is None else None
    lease = services.turns.lease
    if not await leases.acquire(
        db, chat_id, auth.user.id, owner, now, lease, for_message=True, title=title
    ):
        if await approvals.has_pending(db, chat_id):
            raise HTTPException(409, "the turn waits for approvals: answer them, or stop the turn")
        raise HTTPException(409, "a turn is already running in this chat")
    if previous_owner is not None:
        # The lease was taken over from a turn whose process died: close what it left open.
        await leases.settle_orphans(db, chat_id, now)
    message = Message(
        chat_id=chat_id,
        role="user",
        content=body.content,
        status="ok",
        meta={"attachments": [str(a) for a in attachments]} if attachments else {},
        created_at=now,
    )
    db.add(message)
    await db.flush()
    # The first round's row, stored with the message: the turn starts without a write of its own.
    first_round = round_row(chat_id, model.id, now, message.id)
    db.add(first_round)
    await db.commit()

    turn = services.turns.launch(
        TurnPlan(
            owner=owner,
            user_id=auth.user.id,
            chat_id=chat_id,
            user_message_id=message.id,
            model=model,
            first_round_id=first_round.id,
        )
    )
    return StreamingResponse(turn.listen(), media_type="text/event-stream", headers=STREAM_HEADERS)


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
    if await repository.get_chat(db, auth.user.id, chat_id) is None:
        raise HTTPException(404, "chat not found")
    if await services.turns.stop(chat_id, auth.user.id):
        return StopOut(status="stopping")
    if await approvals.cancel_pending(db, chat_id, services.clock.now()):
        await db.commit()
        return StopOut(status="stopped")
    raise HTTPException(409, "no turn is running in this chat")

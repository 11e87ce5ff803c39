"""The tool catalogue and a chat's activations."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Literal

from fastapi import APIRouter, HTTPException, Response
from pydantic import BaseModel

from app.agent.activations import list_activations, reset_activations
from app.api.deps import Auth, DbSession, ServicesDep
from app.chats import repository
from app.core.http.schemas import error_responses

router = APIRouter(prefix="/api", tags=["tools"])


class ToolOut(BaseModel):
    name: str
    description: str


class GroupOut(BaseModel):
    group: str
    kind: Literal["builtin", "mcp"]
    description: str
    status: Literal["starting", "available", "unavailable"]
    tools: list[ToolOut]


class ActivationOut(BaseModel):
    kind: Literal["builtin", "mcp"]
    ref: str
    message_id: int
    created_at: datetime


@router.get("/tools", response_model=list[GroupOut], responses=error_responses(401))
async def list_tools(_auth: Auth, services: ServicesDep) -> list[GroupOut]:
    """Every group of tools a model can activate, with its tools."""
    return [
        GroupOut(
            group=entry.group.name,
            kind=entry.kind,
            description=entry.group.description,
            status=entry.group.status,
            tools=[ToolOut(name=t.name, description=t.description) for t in entry.group.tools],
        )
        for entry in services.catalogue.entries
    ]


@router.get(
    "/chats/{chat_id}/activations",
    response_model=list[ActivationOut],
    responses=error_responses(401, 404),
)
async def get_activations(chat_id: uuid.UUID, auth: Auth, db: DbSession) -> list[ActivationOut]:
    """The groups activated in a chat, each anchored at the message that activated it."""
    if await repository.get_chat(db, auth.user.id, chat_id) is None:
        raise HTTPException(404, "chat not found")
    return [ActivationOut(**row) for row in await list_activations(db, chat_id)]


@router.delete(
    "/chats/{chat_id}/activations",
    status_code=204,
    responses=error_responses(401, 403, 404, 409),
)
async def delete_activations(
    chat_id: uuid.UUID, auth: Auth, services: ServicesDep, db: DbSession
) -> Response:
    """Reset the chat's activations: later turns start with none (a deliberate cache reset)."""
    chat = await repository.get_chat(db, auth.user.id, chat_id)
    if chat is None:
        raise HTTPException(404, "chat not found")
    now = services.clock.now()
    if chat.turn_owner is not None and chat.turn_lease_until and chat.turn_lease_until >= now:
        raise HTTPException(409, "a turn is running in this chat; stop it or wait for its end")
    await reset_activations(db, chat_id)
    await db.commit()
    return Response(status_code=204)

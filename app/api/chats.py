"""Chats: create, list, read with messages, rename or switch model, delete."""

from __future__ import annotations

import uuid

from fastapi import APIRouter, Response

from app.api.deps import Auth, Connection, DbSession, ServicesDep
from app.chats import repository, service, views
from app.chats.schemas import ChatDetailOut, ChatIn, ChatOut, ChatPage, ChatPatch
from app.core.http.json import json_response
from app.core.http.pagination import Cursor, CursorQuery, LimitQuery
from app.core.http.schemas import error_responses

router = APIRouter(prefix="/api/chats", tags=["chats"])


@router.post("", status_code=201, response_model=ChatOut, responses=error_responses(401, 403))
async def create_chat(body: ChatIn, auth: Auth, services: ServicesDep, db: DbSession) -> Response:
    """Start a new chat."""
    chat = await service.create_chat(services, db, auth.user.id, body.title, body.model)
    return json_response(views.chat(chat, services.clock.now()), 201)


@router.get("", response_model=ChatPage, responses=error_responses(401))
async def list_chats(
    auth: Auth,
    services: ServicesDep,
    db: DbSession,
    limit: LimitQuery = 50,
    cursor: CursorQuery = None,
) -> Response:
    """The user's chats, newest activity first."""
    now = services.clock.now()
    after = Cursor.decode(cursor) if cursor else None
    chats, more = await repository.list_chats(
        db, auth.user.id, limit, (after.at, after.id) if after else None
    )
    next_cursor = Cursor(chats[-1].updated_at, chats[-1].id).encode() if more else None
    return json_response(
        {"items": [views.chat(chat, now) for chat in chats], "next_cursor": next_cursor}
    )


@router.get("/{chat_id}", response_model=ChatDetailOut, responses=error_responses(401, 404))
async def get_chat(
    chat_id: uuid.UUID, auth: Auth, services: ServicesDep, connection: Connection
) -> Response:
    """A chat with its messages in order."""
    return json_response(await service.chat_detail(services, connection, auth.user.id, chat_id))


@router.patch("/{chat_id}", response_model=ChatOut, responses=error_responses(401, 403, 404))
async def update_chat(
    chat_id: uuid.UUID, body: ChatPatch, auth: Auth, services: ServicesDep, db: DbSession
) -> Response:
    """Rename a chat or switch its model."""
    changes = body.model_dump(include=body.model_fields_set)
    chat = await service.update_chat(services, db, auth.user.id, chat_id, changes)
    return json_response(views.chat(chat, services.clock.now()))


@router.delete("/{chat_id}", status_code=204, responses=error_responses(401, 403, 404))
async def delete_chat(
    chat_id: uuid.UUID, auth: Auth, services: ServicesDep, db: DbSession
) -> Response:
    """Delete a chat with its messages, tool calls and activations (a running turn stops first)."""
    await service.delete_chat(services, db, auth.user.id, chat_id)
    return Response(status_code=204)

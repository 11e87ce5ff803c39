"""Chats: create, list, read with messages, rename or switch model, delete."""

from __future__ import annotations

import uuid

from fastapi import APIRouter, HTTPException, Response

from app.api.deps import Auth, Connection, DbSession, ServicesDep
from app.chats import repository, views
from app.chats.schemas import ChatDetailOut, ChatIn, ChatOut, ChatPage, ChatPatch
from app.core.errors import unprocessable
from app.core.http.json import json_response
from app.core.http.pagination import Cursor, CursorQuery, LimitQuery
from app.core.http.schemas import error_responses
from app.models import Chat
from app.services import Services

router = APIRouter(prefix="/api/chats", tags=["chats"])


def usable_model(services: Services, model_id: str | None) -> str:
    """The model id a chat may use, or a 422 on `body.model` that says why not."""
    registry = services.registry
    if model_id is None:
        default = registry.default_model()
        if default is None:
            raise unprocessable(("body", "model"), "no model is available; configure a provider")
        return default.id
    model = registry.get(model_id)
    if model is None:
        raise unprocessable(("body", "model"), f"unknown model {model_id!r}; see GET /api/models")
    if not registry.is_available(model):
        reason = (
            f"set {model.provider.api_key_env}"
            if model.provider.api_key_env and registry.api_key(model.provider) is None
            else "its server does not answer"
        )
        raise unprocessable(("body", "model"), f"model {model_id!r} is not available ({reason})")
    return model.id


@router.post("", status_code=201, response_model=ChatOut, responses=error_responses(401, 403))
async def create_chat(body: ChatIn, auth: Auth, services: ServicesDep, db: DbSession) -> Response:
    """Start a new chat."""
    now = services.clock.now()
    chat = Chat(
        user_id=auth.user.id,
        title=body.title,
        model=usable_model(services, body.model),
        created_at=now,
        updated_at=now,
    )
    db.add(chat)
    await db.commit()
    return json_response(views.chat(chat, now), 201)


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
    detail = await repository.chat_detail(connection, auth.user.id, chat_id, services.clock.now())
    if detail is None:
        raise HTTPException(404, "chat not found")
    return json_response(detail)


@router.patch("/{chat_id}", response_model=ChatOut, responses=error_responses(401, 403, 404))
async def update_chat(
    chat_id: uuid.UUID, body: ChatPatch, auth: Auth, services: ServicesDep, db: DbSession
) -> Response:
    """Rename a chat or switch its model."""
    chat = await repository.get_chat(db, auth.user.id, chat_id)
    if chat is None:
        raise HTTPException(404, "chat not found")
    fields = body.model_fields_set
    if "model" in fields:
        if body.model is None:
            raise unprocessable(("body", "model"), "model cannot be null")
        chat.model = usable_model(services, body.model)
    if "title" in fields:
        chat.title = body.title
    if fields:
        repository.touch(chat, services.clock.now())
    await db.commit()
    return json_response(views.chat(chat, services.clock.now()))


@router.delete("/{chat_id}", status_code=204, responses=error_responses(401, 403, 404))
async def delete_chat(
    chat_id: uuid.UUID, auth: Auth, services: ServicesDep, db: DbSession
) -> Response:
    """Delete a chat with its messages, tool calls and activations (a running turn stops first)."""
    if await repository.get_chat(db, auth.user.id, chat_id) is None:
        raise HTTPException(404, "chat not found")
    await services.turns.stop_and_wait(chat_id, auth.user.id)
    if not await repository.delete_chat(db, auth.user.id, chat_id):
        raise HTTPException(404, "chat not found")
    await db.commit()
    return Response(status_code=204)

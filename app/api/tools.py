"""The tool catalogue and a chat's activations."""

from __future__ import annotations

import uuid

from fastapi import APIRouter, Response

from app.api.deps import Auth, DbSession, ServicesDep
from app.chats import service
from app.core.http.schemas import error_responses
from app.tools.catalogue import per_user
from app.tools.schemas import ActivationOut, GroupOut, ToolOut

router = APIRouter(prefix="/api", tags=["tools"])


@router.get("/tools", response_model=list[GroupOut], responses=error_responses(401))
async def list_tools(auth: Auth, services: ServicesDep) -> list[GroupOut]:
    """Every group of tools a model can activate, with its tools and its state for this user."""
    connections = services.mcp.connections if services.mcp is not None else None
    asks_who = any(per_user(entry.group) for entry in services.catalogue.entries)
    connected = await connections.servers(auth.user.id) if connections and asks_who else set[str]()
    groups = []
    for entry in services.catalogue.entries:
        group = entry.group
        connectable = per_user(group)
        status = group.status
        if connectable and status == "available" and group.name not in connected:
            status = "needs_connection"
        groups.append(
            GroupOut(
                group=group.name,
                kind=entry.kind,
                description=group.description,
                status=status,
                error=group.error if status == "unavailable" else None,
                connectable=connectable,
                tools=[ToolOut(name=t.name, description=t.description) for t in group.tools],
            )
        )
    return groups


@router.get(
    "/chats/{chat_id}/activations",
    response_model=list[ActivationOut],
    responses=error_responses(401, 404),
)
async def get_activations(chat_id: uuid.UUID, auth: Auth, db: DbSession) -> list[ActivationOut]:
    """The groups activated in a chat, each anchored at the message that activated it."""
    rows = await service.activations(db, auth.user.id, chat_id)
    return [ActivationOut(**row) for row in rows]


@router.delete(
    "/chats/{chat_id}/activations",
    status_code=204,
    responses=error_responses(401, 403, 404, 409),
)
async def delete_activations(
    chat_id: uuid.UUID, auth: Auth, services: ServicesDep, db: DbSession
) -> Response:
    """Reset the chat's activations: later turns start with none (a deliberate cache reset)."""
    await service.reset_chat_activations(services, db, auth.user.id, chat_id)
    return Response(status_code=204)

"""Administration: `/api/admin/*`, for enabled admins signed in with a session. Anyone else
gets a 403 and nothing changes; an API key is a 403 too, whoever owns it, so a leaked key never
administers. The work is in `app.users.admin`."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Depends, Query, Response

from app.api.deps import Connection, DbSession, PersonAuth, ServicesDep
from app.auth.sessions import Authenticated
from app.core.errors import Forbidden
from app.core.http.json import json_response
from app.core.http.pagination import CursorQuery, LimitQuery
from app.core.http.schemas import error_responses
from app.users import admin
from app.users.schemas import AdminUserOut, AdminUserPage, AdminUserPatch

router = APIRouter(prefix="/api/admin", tags=["admin"])


async def require_admin(auth: PersonAuth) -> Authenticated:
    if not auth.user.is_admin:
        raise Forbidden("administrators only")
    return auth


AdminAuth = Annotated[Authenticated, Depends(require_admin)]


@router.get("/users", response_model=AdminUserPage, responses=error_responses(401, 403))
async def list_users(
    auth: AdminAuth,
    connection: Connection,
    limit: LimitQuery = 50,
    cursor: CursorQuery = None,
    q: Annotated[
        str | None, Query(max_length=320, description="Part of an email or display name")
    ] = None,
) -> Response:
    """Users, newest first, with their state, last activity and own quota."""
    items, next_cursor = await admin.page(connection, q, limit, cursor)
    return json_response({"items": items, "next_cursor": next_cursor})


@router.patch(
    "/users/{user_id}",
    response_model=AdminUserOut,
    responses=error_responses(401, 403, 404, 409),
)
async def update_user(
    user_id: uuid.UUID,
    body: AdminUserPatch,
    auth: AdminAuth,
    services: ServicesDep,
    db: DbSession,
) -> Response:
    """Enable or disable a user, grant or take the admin flag, set their quota. A user disabled
    is refused at once everywhere, and their running turns are stopped."""
    changes = body.changes()
    await admin.update_user(db, user_id, changes)
    if changes.get("disabled"):
        await admin.request_stops(db, user_id, services.clock.now())
        await db.commit()
        await services.turns.stop_user(user_id)
    return json_response(await admin.one(db, user_id))


@router.delete("/users/{user_id}", status_code=204, responses=error_responses(401, 403, 404, 409))
async def delete_user(user_id: uuid.UUID, auth: AdminAuth, services: ServicesDep) -> Response:
    """Delete a user and everything that was theirs: rows, then files on disk."""
    await admin.delete_user(
        services.sessions,
        services.settings.data_dir,
        user_id,
        services.clock,
        services.turns.stop_user,
    )
    return Response(status_code=204)

"""Uploads: receive files (streamed to disk), list, read and delete them.

`POST` hands its body to the service as a stream (`app.uploads.service.receive`) instead of
declaring form parameters, so nothing is buffered or spooled before hearth decides. It also
authenticates on a connection of its own that goes back to the pool before the body is read: a
large upload over a slow link holds no database connection while its bytes arrive.
"""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request, Response
from starlette.requests import ClientDisconnect

from app.api.deps import Auth, Connection, DbSession, ServicesDep, require_auth
from app.auth.sessions import Authenticated
from app.chats import views
from app.core.http.json import json_response
from app.core.http.pagination import CursorQuery, LimitQuery
from app.core.http.schemas import error_responses
from app.files.schemas import UPLOAD_FORM, UploadOut, UploadPage
from app.uploads import service
from app.uploads.service import row_of

router = APIRouter(prefix="/api/uploads", tags=["uploads"])


async def _auth_then_release(request: Request) -> Authenticated:
    """`require_auth` (CSRF included) on a connection that is returned before the body is read."""
    async with request.app.state.services.engine.connect() as connection:
        return await require_auth(request, connection)


UNPROCESSABLE_FORM: dict[str, Any] = {
    "description": "Not an upload form: not multipart, malformed, no file, an unknown field, "
    "or a chat_id that is not a UUID",
    "content": {
        "application/json": {"schema": {"$ref": "#/components/schemas/HTTPValidationError"}}
    },
}

BriefAuth = Annotated[Authenticated, Depends(_auth_then_release)]


@router.post(
    "",
    status_code=201,
    response_model=list[UploadOut],
    openapi_extra=UPLOAD_FORM,
    responses={**error_responses(401, 403, 404, 413), 422: UNPROCESSABLE_FORM},
)
async def create_uploads(request: Request, auth: BriefAuth, services: ServicesDep) -> Response:
    """Upload one or more files (multipart `file` parts), optionally filed under a chat."""
    try:
        uploads = await service.receive(
            services, auth.user.id, request.headers.get("content-type"), request.stream()
        )
    except ClientDisconnect:
        return Response(status_code=400)  # nobody is left to read it; the files are gone
    return json_response([views.upload(row_of(upload)) for upload in uploads], 201)


@router.get("", response_model=UploadPage, responses=error_responses(401))
async def list_uploads(
    auth: Auth, connection: Connection, limit: LimitQuery = 50, cursor: CursorQuery = None
) -> Response:
    """The user's uploads, newest first."""
    rows, next_cursor = await service.page(connection, auth.user.id, limit, cursor)
    return json_response({"items": [views.upload(row) for row in rows], "next_cursor": next_cursor})


@router.get("/{upload_id}", response_model=UploadOut, responses=error_responses(401, 404))
async def get_upload(upload_id: uuid.UUID, auth: Auth, connection: Connection) -> Response:
    """One upload."""
    return json_response(views.upload(await service.one(connection, auth.user.id, upload_id)))


@router.post(
    "/{upload_id}/ingest",
    status_code=202,
    response_model=UploadOut,
    responses=error_responses(401, 403, 404),
)
async def ingest_upload(
    upload_id: uuid.UUID, auth: Auth, services: ServicesDep, db: DbSession
) -> Response:
    """Make a document searchable again (text, Markdown or PDF): `ingestion` goes `pending`."""
    upload = await service.reingest(services, db, auth.user.id, upload_id)
    return json_response(views.upload(row_of(upload)), 202)


@router.delete("/{upload_id}", status_code=204, responses=error_responses(401, 403, 404))
async def delete_upload(
    upload_id: uuid.UUID, auth: Auth, services: ServicesDep, db: DbSession
) -> Response:
    """Delete an upload: its row (its passages and the evidence that cites them go with it),
    then its folder `uploads/<id>/` and all it holds."""
    await service.remove(services, db, auth.user.id, upload_id)
    return Response(status_code=204)

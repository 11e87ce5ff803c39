"""Uploads: receive files (streamed to disk), list, read and delete them.

`POST` reads its body itself (`app.files.multipart`) instead of declaring form parameters, so
nothing is buffered or spooled before the route decides. It also authenticates on a connection
of its own that goes back to the pool before the body is read: a large upload over a slow link
holds no database connection while its bytes arrive. Rows are written only once every file of
the request is complete and the chat (if any) is known to be the user's; any failure removes
every file of the request. Documents (text, PDF) are then ingested in the background
(`app.knowledge.ingest`): the upload answers at once with `ingestion.status` `pending`.
"""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Annotated, Any

import anyio
from fastapi import APIRouter, Depends, Request, Response
from sqlalchemy import and_, delete, func, or_, select
from starlette.requests import ClientDisconnect

from app.api.deps import Auth, Connection, DbSession, ServicesDep, require_auth
from app.auth.sessions import Authenticated
from app.chats import views
from app.chats.service import CHAT_NOT_FOUND
from app.core.db.engine import rows_changed
from app.core.errors import Invalid, NotFound
from app.core.http.json import json_response
from app.core.http.pagination import Cursor, CursorQuery, LimitQuery
from app.core.http.schemas import error_responses
from app.files.multipart import CHAT_FIELD, FormError, UploadForm, read_upload_form
from app.files.quota import allowance
from app.files.roots import user_root
from app.files.schemas import UPLOAD_FORM, UploadOut, UploadPage
from app.files.uploads import remove_upload
from app.knowledge.ingest import is_document
from app.models import Chat, Upload
from app.services import Services

router = APIRouter(prefix="/api/uploads", tags=["uploads"])

UPLOAD_NOT_FOUND = "upload not found"

_COLUMNS = tuple(getattr(Upload, name) for name in views.UPLOAD_COLUMNS)


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


def _render(upload: Upload) -> dict[str, Any]:
    return views.upload(tuple(getattr(upload, name) for name in views.UPLOAD_COLUMNS))


def _chat_id(form: UploadForm) -> uuid.UUID | None:
    if form.chat_id is None:
        return None
    try:
        return uuid.UUID(form.chat_id)
    except ValueError:
        raise FormError(("body", CHAT_FIELD), "chat_id is not a UUID") from None


@router.post(
    "",
    status_code=201,
    response_model=list[UploadOut],
    openapi_extra=UPLOAD_FORM,
    responses={**error_responses(401, 403, 404, 413), 422: UNPROCESSABLE_FORM},
)
async def create_uploads(request: Request, auth: BriefAuth, services: ServicesDep) -> Response:
    """Upload one or more files (multipart `file` parts), optionally filed under a chat."""
    settings = services.settings
    root = await anyio.to_thread.run_sync(user_root, settings.data_dir, auth.user.id)
    room = await anyio.to_thread.run_sync(allowance, root, settings.user_storage_bytes)
    try:
        form = await read_upload_form(
            request.headers.get("content-type"),
            request.stream(),
            lambda boundary: UploadForm(boundary, root, settings.max_upload_bytes, room),
        )
    except ClientDisconnect:
        return Response(status_code=400)  # nobody is left to read it; the files are gone
    try:
        chat_id = _chat_id(form)
        async with services.sessions() as db:
            if chat_id is not None:
                owned = await db.scalar(
                    select(func.count())
                    .select_from(Chat)
                    .where(Chat.id == chat_id, Chat.user_id == auth.user.id)
                )
                if not owned:
                    raise NotFound(CHAT_NOT_FOUND)
            now = services.clock.now()
            uploads = [
                Upload(
                    id=incoming.id,
                    user_id=auth.user.id,
                    chat_id=chat_id,
                    filename=incoming.filename,
                    stored_path=incoming.path,
                    mime=incoming.mime,
                    size=incoming.size,
                    sha256=incoming.sha256,
                    ingest_status="pending" if is_document(incoming.mime) else None,
                    # One instant per request, in the order the files came: newest first lists
                    # the last file of a request first, and never two in an arbitrary order.
                    created_at=now + timedelta(microseconds=index),
                )
                for index, incoming in enumerate(form.files)
            ]
            db.add_all(uploads)
            await db.commit()
    except FormError:
        await anyio.to_thread.run_sync(form.discard)
        raise
    except BaseException:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(form.discard)
        raise
    documents = [upload.id for upload in uploads if upload.ingest_status is not None]
    ingest(services, auth.user.id, documents)
    return json_response([_render(upload) for upload in uploads], 201)


def ingest(services: Services, user_id: uuid.UUID, upload_ids: list[uuid.UUID]) -> None:
    """Queue the user's documents for ingestion, in this order (each user's turn comes round)."""
    if services.ingestor is not None:
        for upload_id in upload_ids:
            services.ingestor.submit(upload_id, user_id)


@router.get("", response_model=UploadPage, responses=error_responses(401))
async def list_uploads(
    auth: Auth, connection: Connection, limit: LimitQuery = 50, cursor: CursorQuery = None
) -> Response:
    """The user's uploads, newest first."""
    query = select(*_COLUMNS).where(Upload.user_id == auth.user.id)
    if cursor:
        after = Cursor.decode(cursor)
        query = query.where(
            or_(
                Upload.created_at < after.at,
                and_(Upload.created_at == after.at, Upload.id < after.id),
            )
        )
    query = query.order_by(Upload.created_at.desc(), Upload.id.desc()).limit(limit + 1)
    rows = (await connection.execute(query)).all()
    page = rows[:limit]
    next_cursor = Cursor(page[-1].created_at, page[-1].id).encode() if len(rows) > limit else None
    return json_response({"items": [views.upload(row) for row in page], "next_cursor": next_cursor})


@router.get("/{upload_id}", response_model=UploadOut, responses=error_responses(401, 404))
async def get_upload(upload_id: uuid.UUID, auth: Auth, connection: Connection) -> Response:
    """One upload."""
    row = (
        await connection.execute(
            select(*_COLUMNS).where(Upload.id == upload_id, Upload.user_id == auth.user.id)
        )
    ).first()
    if row is None:
        raise NotFound(UPLOAD_NOT_FOUND)
    return json_response(views.upload(row))


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
    upload = await db.scalar(
        select(Upload).where(Upload.id == upload_id, Upload.user_id == auth.user.id)
    )
    if upload is None:
        raise NotFound(UPLOAD_NOT_FOUND)
    if not is_document(upload.mime):
        raise Invalid(
            ("path", "upload_id"),
            f"a {upload.mime} upload is not a searchable document (text, Markdown or PDF)",
        )
    upload.ingest_status, upload.ingest_error = "pending", None
    await db.commit()
    ingest(services, auth.user.id, [upload.id])
    return json_response(_render(upload), 202)


@router.delete("/{upload_id}", status_code=204, responses=error_responses(401, 403, 404))
async def delete_upload(
    upload_id: uuid.UUID, auth: Auth, services: ServicesDep, db: DbSession
) -> Response:
    """Delete an upload: its row (its passages and the evidence that cites them go with it),
    then its folder `uploads/<id>/` and all it holds."""
    deleted = await rows_changed(
        db, delete(Upload).where(Upload.id == upload_id, Upload.user_id == auth.user.id)
    )
    if not deleted:
        raise NotFound(UPLOAD_NOT_FOUND)
    await db.commit()
    root = await anyio.to_thread.run_sync(user_root, services.settings.data_dir, auth.user.id)
    await anyio.to_thread.run_sync(remove_upload, root, upload_id)
    return Response(status_code=204)

"""The upload actions, between the routes and storage (`app.files`, the uploads table).

Receiving streams the request body to disk (`app.files.multipart`) before any row is written:
rows are added only once every file of the request is complete and the chat (if any) is known
to be the user's, and any failure removes every file of the request. Documents (text, PDF) are
then ingested in the background (`app.knowledge.ingest`): they answer at once with
`ingestion.status` `pending`. A deleted upload's row goes first (its passages and the evidence
that cites them go with it), then its folder.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterable
from datetime import timedelta

import anyio
from sqlalchemy import and_, delete, func, or_, select
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession

from app.chats import views
from app.core.db.engine import rows_changed
from app.core.errors import Invalid, NotFound
from app.core.http.pagination import Cursor
from app.files.multipart import CHAT_FIELD, FormError, UploadForm, read_upload_form
from app.files.quota import allowance
from app.files.roots import user_root
from app.files.uploads import remove_upload
from app.knowledge.ingest import is_document
from app.models import Chat, Upload
from app.services import Services

UPLOAD_NOT_FOUND = "upload not found"

_COLUMNS = tuple(getattr(Upload, name) for name in views.UPLOAD_COLUMNS)


def row_of(upload: Upload) -> views.UploadRow:
    return views.UploadRow._make(getattr(upload, name) for name in views.UPLOAD_COLUMNS)


def _chat_id(form: UploadForm) -> uuid.UUID | None:
    if form.chat_id is None:
        return None
    try:
        return uuid.UUID(form.chat_id)
    except ValueError:
        raise FormError(("body", CHAT_FIELD), "chat_id is not a UUID") from None


def _ingest(services: Services, user_id: uuid.UUID, upload_ids: Iterable[uuid.UUID]) -> None:
    """Queue the user's documents for ingestion, in this order (each user's turn comes round)."""
    if services.ingestor is not None:
        for upload_id in upload_ids:
            services.ingestor.submit(upload_id, user_id)


async def receive(
    services: Services,
    user_id: uuid.UUID,
    content_type: str | None,
    body: AsyncIterator[bytes],
) -> list[Upload]:
    """Store the files of an upload form, filed under its chat if it names one.

    FormError (a 422) for a body that is not an acceptable form, TooLarge (413) once a file
    passes the upload limit or the user's storage quota; no file of the request stays.
    """
    settings = services.settings
    root = await anyio.to_thread.run_sync(user_root, settings.data_dir, user_id)
    room = await anyio.to_thread.run_sync(allowance, root, settings.user_storage_bytes)
    form = await read_upload_form(
        content_type,
        body,
        lambda boundary: UploadForm(boundary, root, settings.max_upload_bytes, room),
    )
    try:
        chat_id = _chat_id(form)
        async with services.sessions() as db:
            if chat_id is not None:
                owned = await db.scalar(
                    select(func.count())
                    .select_from(Chat)
                    .where(Chat.id == chat_id, Chat.user_id == user_id)
                )
                if not owned:
                    raise NotFound("chat not found")
            now = services.clock.now()
            uploads = [
                Upload(
                    id=incoming.id,
                    user_id=user_id,
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
    except BaseException:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(form.discard)
        raise
    for upload in uploads:
        services.metrics.upload(upload.size)
    _ingest(services, user_id, (u.id for u in uploads if u.ingest_status is not None))
    return uploads


async def page(
    connection: AsyncConnection, user_id: uuid.UUID, limit: int, cursor: str | None
) -> tuple[list[views.UploadRow], str | None]:
    """One page of the user's uploads, newest first, and the cursor of the next page."""
    query = select(*_COLUMNS).where(Upload.user_id == user_id)
    if cursor:
        after = Cursor.decode(cursor)
        query = query.where(
            or_(
                Upload.created_at < after.at,
                and_(Upload.created_at == after.at, Upload.id < after.id),
            )
        )
    query = query.order_by(Upload.created_at.desc(), Upload.id.desc()).limit(limit + 1)
    rows = views.upload_rows(await connection.execute(query))
    shown = rows[:limit]
    more = len(rows) > limit
    return shown, Cursor(shown[-1].created_at, shown[-1].id).encode() if more else None


async def one(
    connection: AsyncConnection, user_id: uuid.UUID, upload_id: uuid.UUID
) -> views.UploadRow:
    found = await connection.execute(
        select(*_COLUMNS).where(Upload.id == upload_id, Upload.user_id == user_id)
    )
    rows = views.upload_rows(found)
    if not rows:
        raise NotFound(UPLOAD_NOT_FOUND)
    return rows[0]


async def stored_file(
    connection: AsyncConnection, user_id: uuid.UUID, upload_id: uuid.UUID, filename: str
) -> views.UploadRow:
    """The upload `/data/<id>/<filename>` names, when it is the user's and the name its own."""
    row = await one(connection, user_id, upload_id)
    if row.filename != filename:
        raise NotFound(UPLOAD_NOT_FOUND)
    return row


async def reingest(
    services: Services, db: AsyncSession, user_id: uuid.UUID, upload_id: uuid.UUID
) -> Upload:
    """Make a document searchable again: its ingestion goes `pending` and is queued."""
    upload = await db.scalar(
        select(Upload).where(Upload.id == upload_id, Upload.user_id == user_id)
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
    _ingest(services, user_id, [upload.id])
    return upload


async def remove(
    services: Services, db: AsyncSession, user_id: uuid.UUID, upload_id: uuid.UUID
) -> None:
    """Delete the upload's row (its passages and their evidence go with it), then its folder."""
    deleted = await rows_changed(
        db, delete(Upload).where(Upload.id == upload_id, Upload.user_id == user_id)
    )
    if not deleted:
        raise NotFound(UPLOAD_NOT_FOUND)
    await db.commit()
    root = await anyio.to_thread.run_sync(user_root, services.settings.data_dir, user_id)
    await anyio.to_thread.run_sync(remove_upload, root, upload_id)

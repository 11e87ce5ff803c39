"""Putting documents in a user's files the way an upload does, and ingesting them in place."""

from __future__ import annotations

import uuid
from datetime import timedelta

from app.db.models import Upload
from app.files.roots import user_root
from app.files.sniff import sniff
from app.knowledge.ingest import is_document
from app.services import Services


async def add_document(
    services: Services, user_id: str | uuid.UUID, filename: str, data: bytes, ingest: bool = True
) -> uuid.UUID:
    """An upload row and its file, ingested now (not in the background) unless told not to."""
    upload_id = uuid.uuid4()
    owner = uuid.UUID(str(user_id))
    relative = f"uploads/{upload_id}/{filename}"
    path = user_root(services.settings.data_dir, owner) / relative
    path.parent.mkdir(parents=True)
    path.write_bytes(data)
    mime = sniff(data[:4096])
    async with services.sessions() as db:
        db.add(
            Upload(
                id=upload_id,
                user_id=owner,
                filename=filename,
                stored_path=relative,
                mime=mime,
                size=len(data),
                sha256="0" * 64,
                created_at=services.clock.now() + timedelta(microseconds=1),
                ingest_status="pending" if is_document(mime) else None,
            )
        )
        await db.commit()
    if ingest:
        assert services.ingestor is not None
        await services.ingestor.ingest(upload_id)
    return upload_id

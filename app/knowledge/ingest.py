"""Ingestion: an uploaded document becomes searchable passages, in the background.

An upload whose sniffed type is text or PDF is stored as `pending`; the `Ingestor` then reads it
off the event loop (PDF text per page through pypdf, text as strict UTF-8), chunks it
(`app.knowledge.chunking`) and writes its passages and its `ready` status in one transaction,
so a search never sees half a document. Anything that goes wrong is `failed` with a reason the
user can read. Uploads are immutable, so ingesting again gives the same chunks with the same
ids: rows whose passage did not change are kept as they are, which keeps the evidence that
points at them. A process that stops mid-ingestion leaves the upload `pending`; the next start
takes it up again (`resume_pending`).

At most `CONCURRENCY` documents are read at once: the work is CPU-bound and the service has
turns to serve. Ingestions of one upload never overlap.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Sequence
from pathlib import Path

from pypdf import PdfReader
from pypdf.errors import PyPdfError
from sqlalchemy import delete, insert, select, update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.db.models import KnowledgeChunk, Upload
from app.files.roots import resolve_inside, user_root
from app.knowledge.chunking import Chunk, chunk_pages, chunk_text, looks_like_markdown

log = logging.getLogger("hearth.knowledge")

PDF = "application/pdf"
CONCURRENCY = 2
MAX_TEXT_BYTES = 64 * 1024 * 1024
"""A text document larger than this is not searchable (its passages would swamp any search)."""
INSERT_BATCH = 1000


class IngestFailed(Exception):
    """The document cannot be made searchable; the message says why, for the user."""


def is_document(mime: str) -> bool:
    """Whether an upload of this (sniffed) type is searchable: PDF or UTF-8 text."""
    return mime == PDF or mime.startswith("text/")


def chunk_id(upload_id: uuid.UUID, ordinal: int) -> str:
    """A passage's stable id: its upload and its place in it (`3f2a9c1b7d4e-12`)."""
    return f"{upload_id.hex[:12]}-{ordinal}"


def extract(path: Path, filename: str, mime: str) -> list[Chunk]:
    """The passages of a document (blocking: run it in a thread)."""
    if mime == PDF:
        return _pdf_chunks(path)
    if path.stat().st_size > MAX_TEXT_BYTES:
        raise IngestFailed(f"the text is over {MAX_TEXT_BYTES // (1024 * 1024)} MiB")
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise IngestFailed(f"not UTF-8 text (byte {exc.start} cannot be decoded)") from None
    chunks = chunk_text(text, markdown=looks_like_markdown(filename, text))
    if not chunks:
        raise IngestFailed("the document has no text")
    return chunks


def _pdf_chunks(path: Path) -> list[Chunk]:
    try:
        reader = PdfReader(path)
        if reader.is_encrypted:
            raise IngestFailed("the PDF is encrypted")
        pages = [page.extract_text() or "" for page in reader.pages]
    except IngestFailed:
        raise
    except (PyPdfError, ValueError, KeyError, TypeError, AttributeError, OSError) as exc:
        raise IngestFailed(f"the PDF cannot be read: {exc}") from None
    chunks = chunk_pages(pages)
    if not chunks:
        raise IngestFailed("the PDF has no text layer (a scan?)")
    return chunks


async def store_chunks(db: AsyncSession, upload: Upload, chunks: Sequence[Chunk]) -> None:
    """Make the upload's passages exactly `chunks`, keeping rows that did not change."""
    wanted = {
        chunk_id(upload.id, n): (chunk.heading, chunk.page, chunk.text, n)
        for n, chunk in enumerate(chunks, start=1)
    }
    stale: list[int] = []
    rows = await db.execute(
        select(
            KnowledgeChunk.id,
            KnowledgeChunk.chunk_id,
            KnowledgeChunk.heading,
            KnowledgeChunk.page,
            KnowledgeChunk.text,
            KnowledgeChunk.ordinal,
        ).where(KnowledgeChunk.upload_id == upload.id)
    )
    for row_id, cid, *kept in rows:
        if wanted.get(cid) == tuple(kept):
            del wanted[cid]
        else:
            stale.append(row_id)
    if stale:
        await db.execute(delete(KnowledgeChunk).where(KnowledgeChunk.id.in_(stale)))
    values = [
        {
            "user_id": upload.user_id,
            "upload_id": upload.id,
            "chunk_id": cid,
            "ordinal": ordinal,
            "page": page,
            "heading": heading,
            "text": text,
        }
        for cid, (heading, page, text, ordinal) in wanted.items()
    ]
    for start in range(0, len(values), INSERT_BATCH):
        await db.execute(insert(KnowledgeChunk), values[start : start + INSERT_BATCH])


class Ingestor:
    """The background ingestions of a process."""

    def __init__(self, sessions: async_sessionmaker[AsyncSession], data_dir: Path) -> None:
        self.sessions = sessions
        self.data_dir = data_dir
        self._slots = asyncio.Semaphore(CONCURRENCY)
        self._tasks: dict[uuid.UUID, asyncio.Task[None]] = {}
        self._resuming: asyncio.Task[None] | None = None

    def submit(self, upload_id: uuid.UUID) -> None:
        """Ingest (again) in the background; after any ingestion of it already under way."""
        previous = self._tasks.get(upload_id)
        task = asyncio.create_task(self._run(upload_id, previous), name=f"ingest {upload_id}")
        self._tasks[upload_id] = task
        task.add_done_callback(lambda done: self._forget(upload_id, done))

    def _forget(self, upload_id: uuid.UUID, task: asyncio.Task[None]) -> None:
        if self._tasks.get(upload_id) is task:
            del self._tasks[upload_id]

    def start(self) -> None:
        """Take up, in the background, the ingestions a stopped process left `pending`; the
        service starts whether or not the database answers yet."""
        self._resuming = asyncio.create_task(self.resume_pending(), name="resume ingestions")

    async def resume_pending(self) -> None:
        """Take up the ingestions a stopped process left `pending`."""
        try:
            async with self.sessions() as db:
                pending = (
                    await db.scalars(select(Upload.id).where(Upload.ingest_status == "pending"))
                ).all()
        except Exception as exc:  # the database is not there yet: the next start tries again
            log.warning("pending ingestions not resumed: %s", exc)
            return
        for upload_id in pending:
            if upload_id not in self._tasks:
                self.submit(upload_id)

    async def idle(self) -> None:
        """Wait until every ingestion submitted so far has ended."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks.values()), return_exceptions=True)

    async def close(self) -> None:
        tasks = [*self._tasks.values(), *([self._resuming] if self._resuming else [])]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _run(self, upload_id: uuid.UUID, previous: asyncio.Task[None] | None) -> None:
        if previous is not None:
            with contextlib.suppress(BaseException):
                await previous
        async with self._slots:
            try:
                await self.ingest(upload_id)
            except asyncio.CancelledError:
                raise
            except Exception:  # never lost silently: the upload says it failed
                log.exception("ingesting upload %s failed", upload_id)
                await self._set_status(upload_id, "failed", "internal error while ingesting")

    async def ingest(self, upload_id: uuid.UUID) -> None:
        """Ingest one upload now (the background task's body; benches call it directly)."""
        async with self.sessions() as db:
            upload = await db.get(Upload, upload_id)
            if upload is None or upload.ingest_status is None:
                return
            user_id, stored, filename, mime = (
                upload.user_id,
                upload.stored_path,
                upload.filename,
                upload.mime,
            )
        try:
            path = await asyncio.to_thread(
                resolve_inside, await asyncio.to_thread(user_root, self.data_dir, user_id), stored
            )
            chunks = await asyncio.to_thread(extract, path, filename, mime)
        except IngestFailed as exc:
            await self._set_status(upload_id, "failed", str(exc))
            return
        except OSError as exc:
            await self._set_status(upload_id, "failed", f"the file cannot be read: {exc.strerror}")
            return
        async with self.sessions() as db:
            upload = await db.get(Upload, upload_id, with_for_update=True)
            if upload is None:
                return  # deleted meanwhile: its passages went with it
            await store_chunks(db, upload, chunks)
            upload.ingest_status, upload.ingest_error = "ready", None
            await db.commit()

    async def _set_status(self, upload_id: uuid.UUID, status: str, error: str | None) -> None:
        async with self.sessions() as db:
            await db.execute(
                update(Upload)
                .where(Upload.id == upload_id)
                .values(ingest_status=status, ingest_error=error)
            )
            await db.commit()

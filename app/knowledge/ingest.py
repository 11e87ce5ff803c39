"""Ingestion: an uploaded document becomes searchable passages, in the background.

An upload whose sniffed type is text or PDF is stored as `pending`; the `Ingestor` then has it
read by a worker process (`app.knowledge.worker`; PDF text page by page through pypdf, text as
strict UTF-8, chunked by `app.knowledge.chunking`, all within the limits of
`app.knowledge.extract`) and writes its passages and its `ready` status in one transaction, so a
search never sees half a document. Anything that goes wrong is `failed` with a reason the user
can read: a limit passed (pages, characters, passages, time, memory), a file that is not what it
claims, or, for a fault of hearth's own, "internal error while ingesting"; what a library or the
database said goes to the log, never to the user. Uploads are immutable, so ingesting again
gives the same chunks with the same ids: rows whose passage did not change are kept as they
are, which keeps the evidence that points at them.

A process that stops mid-ingestion leaves the upload `pending`; the next start takes it up again
(`resume_pending`). That cannot loop on a hostile document: a document cannot stop the server
(it is read in another process, which is killed past its time or memory), and each try ends in
`ready` or `failed` within `Limits.seconds`.

At most `CONCURRENCY` documents are ingested at once, whoever sent them: the work is CPU-bound
and the machine has turns to serve. Waiting documents are taken round-robin across users
(`FairSlots`): one user's hundred uploads delay another user's one by at most one document per
user ahead of it, not by a hundred. Ingestions of one upload never overlap.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections import deque
from collections.abc import AsyncIterator, Hashable, Sequence
from pathlib import Path

from sqlalchemy import delete, insert, select, update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.files.roots import resolve_inside, user_root
from app.knowledge.chunking import Chunk
from app.knowledge.extract import PDF, IngestFailed, Limits, extract
from app.knowledge.worker import WorkerFailed, WorkerPool
from app.models import KnowledgeChunk, Upload

__all__ = ["PDF", "IngestFailed", "Ingestor", "Limits", "extract"]

log = logging.getLogger("hearth.knowledge")

CONCURRENCY = 2
INSERT_BATCH = 1000
INTERNAL_ERROR = "internal error while ingesting"


def is_document(mime: str) -> bool:
    """Whether an upload of this (sniffed) type is searchable: PDF or UTF-8 text."""
    return mime == PDF or mime.startswith("text/")


def chunk_id(upload_id: uuid.UUID, ordinal: int) -> str:
    """A passage's stable id: its upload and its place in it (`3f2a9c1b7d4e-12`)."""
    return f"{upload_id.hex[:12]}-{ordinal}"


class FairSlots:
    """At most `size` holders at once; waiters are let in round-robin across their owners, and
    in the order they came within one owner."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._busy = 0
        self._waiting: dict[Hashable, deque[asyncio.Future[None]]] = {}
        """Owners in their turn order (the next one first), each with its waiters."""

    @contextlib.asynccontextmanager
    async def hold(self, owner: Hashable) -> AsyncIterator[None]:
        await self._acquire(owner)
        try:
            yield
        finally:
            self._release()

    async def _acquire(self, owner: Hashable) -> None:
        if self._busy < self.size and not self._waiting:
            self._busy += 1
            return
        waiter = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(owner, deque()).append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self._release()  # let in just as it was cancelled: pass the slot on
            else:
                queue = self._waiting.get(owner)
                if queue is not None and waiter in queue:
                    queue.remove(waiter)
                    if not queue:
                        del self._waiting[owner]
            raise

    def _release(self) -> None:
        self._busy -= 1
        while self._waiting and self._busy < self.size:
            owner, queue = next(iter(self._waiting.items()))
            waiter = queue.popleft()
            del self._waiting[owner]
            if queue:
                self._waiting[owner] = queue  # to the back of the turn order
            if not waiter.done():
                self._busy += 1
                waiter.set_result(None)


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
    """The background ingestions of a process, and the worker processes that read documents."""

    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        data_dir: Path,
        *,
        concurrency: int = CONCURRENCY,
        limits: Limits | None = None,
    ) -> None:
        self.sessions = sessions
        self.data_dir = data_dir
        self.limits = limits or Limits()
        """What reading one document may take (read at each document's start)."""
        self.workers = WorkerPool(concurrency)
        self._slots = FairSlots(concurrency)
        self._tasks: dict[uuid.UUID, asyncio.Task[None]] = {}
        self._resuming: asyncio.Task[None] | None = None

    def submit(self, upload_id: uuid.UUID, user_id: uuid.UUID | None = None) -> None:
        """Ingest (again) in the background; after any ingestion of it already under way. With
        its owner given, it takes its place in that user's queue now (one user's uploads are
        ingested in the order they were submitted); else once the upload is looked up."""
        previous = self._tasks.get(upload_id)
        task = asyncio.create_task(
            self._run(upload_id, user_id, previous), name=f"ingest {upload_id}"
        )
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
                    await db.execute(
                        select(Upload.id, Upload.user_id)
                        .where(Upload.ingest_status == "pending")
                        .order_by(Upload.created_at, Upload.id)
                    )
                ).all()
        except Exception as exc:  # the database is not there yet: the next start tries again
            log.warning("pending ingestions not resumed: %s", exc)
            return
        for upload_id, user_id in pending:
            if upload_id not in self._tasks:
                self.submit(upload_id, user_id)

    async def idle(self) -> None:
        """Wait until every ingestion submitted so far has ended."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks.values()), return_exceptions=True)

    async def close(self) -> None:
        tasks = [*self._tasks.values(), *([self._resuming] if self._resuming else [])]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self.workers.close()

    async def _run(
        self,
        upload_id: uuid.UUID,
        user_id: uuid.UUID | None,
        previous: asyncio.Task[None] | None,
    ) -> None:
        if previous is not None:
            with contextlib.suppress(BaseException):
                await previous
        try:
            await self.ingest(upload_id, user_id)
        except asyncio.CancelledError:
            raise
        except Exception:  # never lost silently: the upload says it failed
            log.exception("ingesting upload %s failed", upload_id)
            await self._set_status(upload_id, "failed", INTERNAL_ERROR)

    async def ingest(self, upload_id: uuid.UUID, user_id: uuid.UUID | None = None) -> None:
        """Ingest one upload now, in its turn among the users' (the background task's body;
        tests and benches call it directly). `user_id` is its owner, looked up if not given."""
        if user_id is None:
            async with self.sessions() as db:
                user_id = await db.scalar(select(Upload.user_id).where(Upload.id == upload_id))
            if user_id is None:
                return
        async with self._slots.hold(user_id):
            await self._ingest(upload_id)

    async def _ingest(self, upload_id: uuid.UUID) -> None:
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
            root = await asyncio.to_thread(user_root, self.data_dir, user_id)
            path = await asyncio.to_thread(resolve_inside, root, stored)
            chunks = await self.workers.extract(path, filename, mime, self.limits)
        except IngestFailed as exc:
            detail = f" ({exc.detail})" if exc.detail else ""
            log.info("upload %s (user %s) not ingested: %s%s", upload_id, user_id, exc, detail)
            await self._set_status(upload_id, "failed", str(exc))
            return
        except WorkerFailed:
            log.exception("upload %s (user %s): the worker failed", upload_id, user_id)
            await self._set_status(upload_id, "failed", INTERNAL_ERROR)
            return
        except OSError as exc:
            log.warning("upload %s (user %s) cannot be read: %s", upload_id, user_id, exc)
            await self._set_status(upload_id, "failed", "the file cannot be read")
            return
        async with self.sessions() as db:
            upload = await db.get(Upload, upload_id, with_for_update=True)
            if upload is None:
                return  # deleted meanwhile: its passages went with it
            await store_chunks(db, upload, chunks)
            upload.ingest_status, upload.ingest_error = "ready", None
            await db.commit()
        log.info("upload %s (user %s) ingested: %d passages", upload_id, user_id, len(chunks))

    async def _set_status(self, upload_id: uuid.UUID, status: str, error: str | None) -> None:
        async with self.sessions() as db:
            await db.execute(
                update(Upload)
                .where(Upload.id == upload_id)
                .values(ingest_status=status, ingest_error=error)
            )
            await db.commit()

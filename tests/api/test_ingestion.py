"""Ingestion through the upload routes: documents go pending -> ready or failed (with a reason)
in the background, can be ingested again on demand, and go away with their upload. Hostile
documents (one content stream on a hundred pages, a NUL past the sniffed head, a page that takes
minutes or gigabytes to read) fail with a reason and cost the service nothing but a worker
process; one user's many uploads do not hold up another's."""

from __future__ import annotations

import logging
import os
import signal
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from sqlalchemy import func, select

from app.knowledge.extract import CHARS_PER_BYTE, Limits
from app.knowledge.ingest import Ingestor
from app.knowledge.search import search
from app.models import KnowledgeChunk
from app.services import Services
from tests.api.test_uploads import PNG, upload_one
from tests.conftest import NewUser
from tests.knowledge.documents import add_document, busy_page, dense_page, pdf, shared_stream_pdf
from tests.support import Client, wait_until

pytestmark = pytest.mark.usefixtures("services")


async def settled(client: Client, upload_id: str, within: float = 20) -> dict[str, Any]:
    """The upload once its ingestion is no longer pending."""
    seen: dict[str, Any] = {}

    async def done() -> dict[str, Any] | None:
        seen["item"] = item = (await client.get(f"/api/uploads/{upload_id}")).json()
        return item if item["ingestion"]["status"] != "pending" else None

    return await wait_until(done, within=within, failure=lambda: f"still pending: {seen['item']}")


async def chunk_count(services: Services, upload_id: str) -> int:
    async with services.sessions() as db:
        query = select(func.count()).where(KnowledgeChunk.upload_id == uuid.UUID(upload_id))
        return await db.scalar(query) or 0


async def test_a_markdown_upload_becomes_searchable(user: Client, services: Services) -> None:
    item = await upload_one(user, "notes.md", b"# Notes\n\nThe kettle is in the attic.\n")
    assert item["ingestion"] == {"status": "pending", "error": None}
    ready = await settled(user, item["id"])
    assert ready["ingestion"] == {"status": "ready", "error": None}
    async with services.sessions() as db:
        [hit] = await search(db, uuid.UUID(user.user["id"]), "where is the kettle", 5)
    assert (hit.chunk_id, hit.heading, hit.text) == (
        f"{uuid.UUID(item['id']).hex[:12]}-1",
        "Notes",
        "The kettle is in the attic.",
    )


async def test_a_pdf_is_searchable_page_by_page(user: Client, services: Services) -> None:
    item = await upload_one(
        user, "manual.pdf", pdf("Safety first.", "", "The blue valve controls the pressure.")
    )
    assert item["mime"] == "application/pdf"
    assert (await settled(user, item["id"]))["ingestion"]["status"] == "ready"
    async with services.sessions() as db:
        [hit] = await search(db, uuid.UUID(user.user["id"]), "valve pressure", 5)
    assert hit.page == 3 and hit.text == "The blue valve controls the pressure."


@pytest.mark.parametrize(
    ("name", "content", "reason"),
    [
        ("latin1.txt", b"plain ascii start " * 4000 + b"caf\xe9\n", "not UTF-8 text"),
        ("scan.pdf", None, "no text layer"),
        ("broken.pdf", b"%PDF-1.4\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF\n", "cannot be read"),
        ("empty.md", b"\n\n   \n", "has no text"),
    ],
)
async def test_documents_that_cannot_be_searched_fail_with_a_reason(
    user: Client, services: Services, name: str, content: bytes | None, reason: str
) -> None:
    item = await upload_one(user, name, content if content is not None else pdf("", ""))
    failed = await settled(user, item["id"])
    assert failed["ingestion"]["status"] == "failed"
    assert reason in failed["ingestion"]["error"]
    assert await chunk_count(services, item["id"]) == 0


async def test_other_uploads_are_not_documents(user: Client) -> None:
    item = await upload_one(user, "chart.png", PNG)
    assert item["ingestion"] is None
    response = await user.post(f"/api/uploads/{item['id']}/ingest")
    assert response.status_code == 422
    assert "not a searchable document" in response.json()["detail"][0]["msg"]


async def test_ingest_again_on_demand_keeps_the_same_ids(user: Client, services: Services) -> None:
    item = await upload_one(user, "notes.md", b"# A\n\nOne.\n\n# B\n\nTwo.\n")
    await settled(user, item["id"])
    async with services.sessions() as db:
        before = (
            await db.execute(select(KnowledgeChunk.id, KnowledgeChunk.chunk_id).order_by("id"))
        ).all()
    response = await user.post(f"/api/uploads/{item['id']}/ingest")
    assert response.status_code == 202
    assert response.json()["ingestion"] == {"status": "pending", "error": None}
    assert (await settled(user, item["id"]))["ingestion"]["status"] == "ready"
    async with services.sessions() as db:
        after = (
            await db.execute(select(KnowledgeChunk.id, KnowledgeChunk.chunk_id).order_by("id"))
        ).all()
    assert after == before and len(before) == 2  # unchanged passages keep their rows


async def test_ingest_route_refuses_careless_and_hostile_clients(
    user: Client, new_user: NewUser, anon: Client
) -> None:
    theirs = await upload_one(await new_user(), "theirs.md", b"# Theirs\n\nSecret.\n")
    assert (await user.post(f"/api/uploads/{theirs['id']}/ingest")).status_code == 404
    assert (await user.post(f"/api/uploads/{uuid.uuid4()}/ingest")).status_code == 404
    assert (await user.post("/api/uploads/not-a-uuid/ingest")).status_code == 422
    assert (await user.post("/api/uploads/..%2F..%2Fetc/ingest")).status_code == 404  # no route
    mine = await upload_one(user, "mine.md", b"# Mine\n\nText.\n")
    assert (await user.http.post(f"/api/uploads/{mine['id']}/ingest")).status_code == 403
    assert (await anon.post(f"/api/uploads/{mine['id']}/ingest")).status_code == 401
    assert (await user.get(f"/api/uploads/{mine['id']}/ingest")).status_code == 405


async def test_deleting_an_upload_removes_its_passages(user: Client, services: Services) -> None:
    item = await upload_one(user, "notes.md", b"# Notes\n\nThe kettle is in the attic.\n")
    await settled(user, item["id"])
    assert await chunk_count(services, item["id"]) == 1
    assert (await user.delete(f"/api/uploads/{item['id']}")).status_code == 204
    assert await chunk_count(services, item["id"]) == 0
    async with services.sessions() as db:
        assert await search(db, uuid.UUID(user.user["id"]), "kettle", 5) == []


async def test_a_pending_ingestion_left_by_a_stopped_process_is_taken_up(
    user: Client, services: Services
) -> None:
    upload_id = await add_document(
        services, user.user["id"], "left.md", b"# Left\n\nLeft pending.\n", ingest=False
    )
    assert services.ingestor is not None
    await services.ingestor.resume_pending()
    await services.ingestor.idle()
    item = (await user.get(f"/api/uploads/{upload_id}")).json()
    assert item["ingestion"] == {"status": "ready", "error": None}


# ============================================================================================
# Hostile documents: every bound ends in `failed` with a reason, never `pending`, never a hang.
# ============================================================================================


@pytest.fixture
async def solo(services: Services) -> AsyncIterator[Ingestor]:
    """An ingestor of its own that reads one document at a time (its own worker processes)."""
    ingestor = Ingestor(services.sessions, services.settings.data_dir, concurrency=1)
    yield ingestor
    await ingestor.close()


async def ingestion(client: Client, upload_id: uuid.UUID) -> dict[str, Any]:
    return (await client.get(f"/api/uploads/{upload_id}")).json()["ingestion"]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def test_a_heading_line_of_sixty_thousand_blanks_is_ingested(
    user: Client, services: Services
) -> None:
    item = await upload_one(user, "notes.md", b"# a" + b" " * 60_000 + b"b\n\nBody text.\n")
    assert (await settled(user, item["id"]))["ingestion"] == {"status": "ready", "error": None}
    async with services.sessions() as db:
        [hit] = await search(db, uuid.UUID(user.user["id"]), "body text", 5)
    assert hit.heading == "a" + " " * 60_000 + "b" and hit.text == "Body text."


async def test_text_with_a_nul_byte_after_the_sniffed_head_is_not_text(
    user: Client, services: Services
) -> None:
    data = b"A line of plain text.\n" * 400 + b"\x00 and more text\n"
    assert len(data) > 8192 and b"\x00" not in data[:8192]
    item = await upload_one(user, "log.txt", data)
    assert item["mime"] == "text/plain"
    failed = await settled(user, item["id"])
    assert failed["ingestion"] == {
        "status": "failed",
        "error": "the file holds NUL bytes; it is not a text document",
    }
    assert await chunk_count(services, item["id"]) == 0


async def test_a_hundred_pages_sharing_one_content_stream_are_not_indexed(
    user: Client, services: Services
) -> None:
    data = shared_stream_pdf(dense_page(160), pages=100)
    assert len(data) < 32 * 1024  # a small file that reads as 1.8 million characters
    item = await upload_one(user, "echo.pdf", data)
    failed = await settled(user, item["id"])
    assert failed["ingestion"]["status"] == "failed"
    assert failed["ingestion"]["error"].startswith(
        f"the file gives over {CHARS_PER_BYTE} times its size in text"
    )
    assert await chunk_count(services, item["id"]) == 0


async def test_an_unreadable_pdf_fails_without_the_parser_s_words(user: Client) -> None:
    item = await upload_one(
        user, "broken.pdf", b"%PDF-1.4\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF\n"
    )
    failed = await settled(user, item["id"])
    assert failed["ingestion"] == {"status": "failed", "error": "the PDF cannot be read"}


@pytest.mark.parametrize(
    ("name", "data", "limits", "reason"),
    [
        (
            "long.pdf",
            pdf("One.", "Two.", "Three."),
            Limits(pages=2),
            "the PDF has 3 pages; a PDF of over 2 pages is not indexed",
        ),
        (
            "notes.md",
            b"# A\n\nOne.\n\n# B\n\nTwo.\n\n# C\n\nThree.\n",
            Limits(chunks=2),
            "the document is too long: it gives over 2 passages",
        ),
    ],
)
async def test_documents_over_a_limit_fail_and_keep_nothing(
    user: Client,
    services: Services,
    monkeypatch: pytest.MonkeyPatch,
    name: str,
    data: bytes,
    limits: Limits,
    reason: str,
) -> None:
    assert services.ingestor is not None
    monkeypatch.setattr(services.ingestor, "limits", limits)
    item = await upload_one(user, name, data)
    failed = await settled(user, item["id"])
    assert failed["ingestion"]["status"] == "failed"
    assert failed["ingestion"]["error"].startswith(reason)
    assert await chunk_count(services, item["id"]) == 0


@pytest.mark.slow
async def test_a_document_over_the_time_limit_is_stopped_and_its_worker_replaced(
    user: Client, services: Services, solo: Ingestor
) -> None:
    owner = user.user["id"]
    first = await add_document(services, owner, "a.md", b"# A\n\nFirst.\n", ingest=False)
    await solo.ingest(first)
    [worker] = solo.workers.pids()
    solo.limits = Limits(seconds=1)
    slow = await add_document(
        services, owner, "slow.pdf", shared_stream_pdf(busy_page(100_000), 300), ingest=False
    )
    await solo.ingest(slow)  # each page takes seconds; the document would take many minutes
    assert await ingestion(user, slow) == {
        "status": "failed",
        "error": "reading the document took longer than the limit of 1 s",
    }
    assert await chunk_count(services, str(slow)) == 0
    assert not alive(worker) and solo.workers.pids() == set()
    solo.limits = Limits()
    after = await add_document(services, owner, "b.md", b"# B\n\nAfter.\n", ingest=False)
    await solo.ingest(after)
    assert (await ingestion(user, after))["status"] == "ready"
    [replacement] = solo.workers.pids()
    assert replacement != worker and solo.workers.started == 2


@pytest.mark.slow
async def test_a_document_over_the_memory_cap_is_stopped_and_its_worker_replaced(
    user: Client, services: Services, solo: Ingestor
) -> None:
    owner = user.user["id"]
    solo.limits = Limits(memory_bytes=192 * 1024 * 1024)
    hungry = await add_document(
        services, owner, "hungry.pdf", shared_stream_pdf(busy_page(1_500_000), 1), ingest=False
    )
    await solo.ingest(hungry)  # reading that one page takes gigabytes
    assert await ingestion(user, hungry) == {
        "status": "failed",
        "error": "reading the document needed more than the limit of 192 MiB of memory",
    }
    assert solo.workers.pids() == set() and solo.workers.started == 1
    after = await add_document(services, owner, "b.md", b"# B\n\nAfter.\n", ingest=False)
    await solo.ingest(after)
    assert (await ingestion(user, after))["status"] == "ready"
    assert solo.workers.started == 2


async def test_a_worker_that_dies_mid_document_leaves_it_failed_not_pending(
    user: Client, services: Services, solo: Ingestor
) -> None:
    slow = await add_document(
        services, user.user["id"], "slow.pdf", shared_stream_pdf(busy_page(100_000), 300), False
    )
    solo.submit(slow)
    await wait_until(solo.workers.pids, within=60, failure="no worker took the document up")
    [worker] = solo.workers.pids()
    os.kill(worker, signal.SIGKILL)  # as the kernel's OOM killer or a crashing parser would
    await solo.idle()
    assert await ingestion(user, slow) == {
        "status": "failed",
        "error": "reading the document stopped unexpectedly",
    }
    await solo.resume_pending()  # as the next start would: nothing is taken up again
    await solo.idle()
    assert (await ingestion(user, slow))["status"] == "failed"


async def test_one_user_s_many_uploads_do_not_starve_another_s(
    new_user: NewUser, services: Services, solo: Ingestor, caplog: pytest.LogCaptureFixture
) -> None:
    alice, bob = await new_user(), await new_user()
    theirs = [
        await add_document(
            services, alice.user["id"], f"a{n}.md", f"# A{n}\n\nText.\n".encode(), False
        )
        for n in range(6)
    ]
    mine = await add_document(services, bob.user["id"], "b.md", b"# B\n\nText.\n", False)
    caplog.set_level(logging.INFO, logger="hearth.knowledge")
    for upload_id in theirs:
        solo.submit(upload_id, uuid.UUID(alice.user["id"]))
    solo.submit(mine, uuid.UUID(bob.user["id"]))
    await solo.idle()
    done = [
        record.args[0]  # type: ignore[index]
        for record in caplog.records
        if record.name == "hearth.knowledge" and record.msg.endswith("ingested: %d passages")
    ]
    assert sorted(done) == sorted([*theirs, mine])
    # One at a time, round-robin across users: Bob's one upload is at most the third done,
    # not the seventh behind Alice's six.
    assert done.index(mine) <= 2
    assert [u for u in done if u != mine] == theirs  # each user's own in the order sent

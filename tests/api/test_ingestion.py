"""Ingestion through the upload routes: documents go pending -> ready or failed (with a reason)
in the background, can be ingested again on demand, and go away with their upload."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from fpdf import FPDF
from sqlalchemy import func, select

from app.db.models import KnowledgeChunk
from app.knowledge.search import search
from app.services import Services
from tests.api.test_uploads import PNG, upload_one
from tests.conftest import NewUser
from tests.knowledge.documents import add_document
from tests.support import Client

pytestmark = pytest.mark.usefixtures("services")


def pdf(*pages: str) -> bytes:
    document = FPDF()
    document.set_font("helvetica", size=12)
    for text in pages:
        document.add_page()
        if text:
            document.multi_cell(0, 8, text)
    return bytes(document.output())


async def settled(client: Client, upload_id: str, within: float = 20) -> dict[str, Any]:
    """The upload once its ingestion is no longer pending."""
    deadline = asyncio.get_running_loop().time() + within
    while True:
        item = (await client.get(f"/api/uploads/{upload_id}")).json()
        if item["ingestion"]["status"] != "pending":
            return item
        assert asyncio.get_running_loop().time() < deadline, item
        await asyncio.sleep(0.02)


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
    assert (await user.post("/api/uploads/..%2F..%2Fetc/ingest")).status_code in (404, 422)
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

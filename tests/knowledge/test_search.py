"""Search on both engines (SQLite FTS5, PostgreSQL full-text), over real ingested documents."""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy import delete, func, select, text, update

from app.knowledge.search import query_terms, search
from app.models import KnowledgeChunk, Upload
from app.services import Services
from tests.conftest import NewUser
from tests.knowledge.corpus import generate, recall_at
from tests.knowledge.documents import add_document

pytestmark = pytest.mark.usefixtures("services")


async def test_recall_at_5_of_planted_facts(services: Services, new_user: NewUser) -> None:
    user = await new_user()
    corpus = generate(documents=12, paragraphs=40, facts_every=4, seed=11)
    for filename, body in corpus.documents:
        await add_document(services, user.user["id"], filename, body.encode())
    async with services.sessions() as db:
        chunks = await db.scalar(select(func.count()).select_from(KnowledgeChunk))
        results = [
            [hit.text for hit in await search(db, uuid.UUID(user.user["id"]), fact.question, 5)]
            for fact in corpus.facts
        ]
    assert chunks and chunks > 200
    assert len(corpus.facts) == 120
    recall = recall_at(5, results, corpus.facts)
    print(f"recall@5 {recall:.3f}")
    assert recall >= 0.9


async def test_results_carry_the_source_and_stay_with_their_owner(
    services: Services, new_user: NewUser
) -> None:
    alice, bob = await new_user(), await new_user()
    mine = await add_document(
        services,
        alice.user["id"],
        "guide.md",
        b"# Garden\n\n## Watering\n\nThe tomatoes need water every evening in July.\n",
    )
    await add_document(
        services, bob.user["id"], "bob.md", b"# Bob\n\nBob waters tomatoes every evening.\n"
    )
    async with services.sessions() as db:
        hits = await search(db, uuid.UUID(alice.user["id"]), "when to water tomatoes?", 5)
    assert [(h.upload_id, h.filename, h.page, h.heading) for h in hits] == [
        (mine, "guide.md", None, "Garden > Watering")
    ]
    hit = hits[0]
    assert hit.chunk_id == f"{mine.hex[:12]}-1"
    assert hit.text == "The tomatoes need water every evening in July."
    assert "tomatoes" in hit.snippet and len(hit.snippet) <= len(hit.text) + 2


async def test_only_ready_documents_are_searched_and_deleting_removes_passages(
    services: Services, new_user: NewUser
) -> None:
    user = await new_user()
    owner = uuid.UUID(user.user["id"])
    upload_id = await add_document(services, owner, "a.txt", b"Zebras graze at dawn.\n")
    async with services.sessions() as db:
        assert len(await search(db, owner, "zebra", 5)) == 1
        await db.execute(update(Upload).values(ingest_status="pending"))
        await db.commit()
        assert await search(db, owner, "zebra", 5) == []
        await db.execute(delete(Upload).where(Upload.id == upload_id))
        await db.commit()
        left = await db.scalar(select(func.count()).select_from(KnowledgeChunk))
        assert left == 0
        if services.engine.dialect.name == "sqlite":  # the FTS index follows the cascade
            matches = await db.scalar(
                text("SELECT count(*) FROM knowledge_fts WHERE knowledge_fts MATCH 'zebra'")
            )
            assert matches == 0


async def test_query_syntax_never_reaches_the_engine(services: Services, new_user: NewUser) -> None:
    user = await new_user()
    owner = uuid.UUID(user.user["id"])
    await add_document(services, owner, "q.txt", b"Quotes and (brackets) are plain text here.\n")
    async with services.sessions() as db:
        for query in ['"unbalanced', "a OR", "NEAR(x y)", "col:value*", "!&|<->:*", "''", ""]:
            await search(db, owner, query, 5)  # no error, whatever they find
        hits = await search(db, owner, '"brackets" AND (quotes)', 5)
    assert len(hits) == 1
    assert query_terms("Ünïcode wörds, twice: wörds") == ["ünïcode", "wörds", "twice"]


async def test_a_connection_searches_as_a_session_does(
    services: Services, new_user: NewUser
) -> None:
    user = await new_user()
    owner = uuid.UUID(user.user["id"])
    await add_document(services, owner, "c.txt", b"Otters hold hands while they sleep.\n")
    async with services.sessions() as db:
        from_session = await search(db, owner, "otters sleeping", 5)
    async with services.engine.connect() as conn:
        from_connection = await search(conn, owner, "otters sleeping", 5)
    assert len(from_session) == 1
    assert from_connection == from_session

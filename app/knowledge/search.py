"""Search over the user's own documents: one interface, the engine of the database in use.

`search` takes a question in plain words, not a query language: the words are pulled out of it
(anything else a model or user might type — quotes, operators, brackets — never reaches the
engine's parser) and any of them may match, ranked by the engine (bm25 on SQLite FTS5,
`ts_rank` on PostgreSQL, both with English stemming). Only passages of the user's own uploads
whose ingestion is `ready` are searched; the snippet is made for the returned rows only.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Float, func, literal_column, select, table, text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession
from sqlalchemy.sql.elements import ColumnClause, ColumnElement

from app.knowledge.index import FTS_TABLE, TS_CONFIG, TSV_COLUMN
from app.models import KnowledgeChunk, Upload

MAX_TERMS = 32
SNIPPET_WORDS = 24
_WORD = re.compile(r"\w+", re.UNICODE)


@dataclass(frozen=True, slots=True)
class Hit:
    row_id: int
    chunk_id: str
    upload_id: uuid.UUID
    filename: str
    mime: str
    page: int | None
    heading: str | None
    text: str
    snippet: str
    score: float
    """Higher is better, comparable within one search only."""


def query_terms(query: str) -> list[str]:
    """The distinct words of a query, lower-cased, in order (at most MAX_TERMS)."""
    return list(dict.fromkeys(w.lower() for w in _WORD.findall(query)))[:MAX_TERMS]


async def search(
    db: AsyncSession | AsyncConnection, user_id: uuid.UUID, query: str, limit: int = 5
) -> list[Hit]:
    """The best `limit` passages of the user's ready documents for `query`."""
    terms = query_terms(query)
    if not terms or limit < 1:
        return []
    dialect = _dialect_name(db)
    if dialect == "sqlite":
        return await _sqlite(db, user_id, terms, limit)
    if dialect == "postgresql":
        return await _postgresql(db, user_id, terms, limit)
    raise NotImplementedError(f"no knowledge search for {dialect}")


def _dialect_name(db: AsyncSession | AsyncConnection) -> str:
    """The engine behind a session (whatever it is bound to) or a connection."""
    if isinstance(db, AsyncConnection):
        return db.dialect.name
    return db.get_bind().dialect.name


_COLUMNS = (
    KnowledgeChunk.id,
    KnowledgeChunk.chunk_id,
    KnowledgeChunk.upload_id,
    Upload.filename,
    Upload.mime,
    KnowledgeChunk.page,
    KnowledgeChunk.heading,
    KnowledgeChunk.text,
)


def _scope(user_id: uuid.UUID) -> tuple[ColumnElement[bool], ...]:
    """The user's own passages, of documents whose ingestion is complete."""
    return (KnowledgeChunk.user_id == user_id, Upload.ingest_status == "ready")


async def _sqlite(
    db: AsyncSession | AsyncConnection, user_id: uuid.UUID, terms: list[str], limit: int
) -> list[Hit]:
    fts = table(FTS_TABLE, literal_column("rowid"))
    match = " OR ".join(f'"{term}"' for term in terms)  # words only: quoting is enough
    fts_ref: ColumnClause[Any] = literal_column(FTS_TABLE)
    # bm25 is lower-is-better; the heading column weighs twice the text.
    score = func.bm25(fts_ref, 2.0, 1.0, type_=Float)
    snippet = func.snippet(fts_ref, 1, "", "", "…", SNIPPET_WORDS)
    query = (
        select(*_COLUMNS, snippet, score)
        .select_from(fts)
        .join(KnowledgeChunk, KnowledgeChunk.id == literal_column(f"{FTS_TABLE}.rowid"))
        .join(Upload, Upload.id == KnowledgeChunk.upload_id)
        .where(text(f"{FTS_TABLE} MATCH :match").bindparams(match=match), *_scope(user_id))
        .order_by(score, KnowledgeChunk.id)
        .limit(limit)
    )
    rows = (await db.execute(query)).all()
    # bm25 is lower-is-better: negated, higher is better as on PostgreSQL.
    return [_hit(row, snippet=row[8], score=-row[9]) for row in rows]


async def _postgresql(
    db: AsyncSession | AsyncConnection, user_id: uuid.UUID, terms: list[str], limit: int
) -> list[Hit]:
    tsquery = func.to_tsquery(TS_CONFIG, " | ".join(terms))  # words only: no operators
    vector: ColumnClause[Any] = literal_column(f"knowledge_chunks.{TSV_COLUMN}")
    score = func.ts_rank(vector, tsquery, 1, type_=Float).label("score")
    best = (
        select(KnowledgeChunk.id.label("id"), score)
        .join(Upload, Upload.id == KnowledgeChunk.upload_id)
        .where(vector.op("@@")(tsquery), *_scope(user_id))
        .order_by(score.desc(), KnowledgeChunk.id)
        .limit(limit)
        .subquery()
    )
    snippet = func.ts_headline(
        TS_CONFIG,
        KnowledgeChunk.text,
        tsquery,
        f'StartSel="", StopSel="", MaxWords={SNIPPET_WORDS}, MinWords=8, ShortWord=2',
    )
    query = (
        select(*_COLUMNS, snippet, best.c.score)
        .select_from(best)
        .join(KnowledgeChunk, KnowledgeChunk.id == best.c.id)
        .join(Upload, Upload.id == KnowledgeChunk.upload_id)
        .order_by(best.c.score.desc(), KnowledgeChunk.id)
    )
    rows = (await db.execute(query)).all()
    return [_hit(row, snippet=row[8], score=row[9]) for row in rows]


def _hit(row: Sequence[Any], *, snippet: str, score: float) -> Hit:
    """A hit from a row that starts with `_COLUMNS`."""
    return Hit(
        row_id=row[0],
        chunk_id=row[1],
        upload_id=row[2],
        filename=row[3],
        mime=row[4],
        page=row[5],
        heading=row[6],
        text=row[7],
        snippet=snippet,
        score=score,
    )

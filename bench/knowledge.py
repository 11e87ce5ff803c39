"""Knowledge search on both databases: ingestion rate, search latency and recall of planted facts.

hearth makes a user's text and PDF uploads searchable (`app/knowledge`): the `Ingestor` has
each `pending` upload read and chunked in a worker process (pypdf per page, or strict UTF-8,
within the limits of `app.knowledge.extract`) and writes its passages and its `ready` status in
one transaction, at most `CONCURRENCY` (2) at once, round-robin across users;
`search` ranks the user's passages with SQLite FTS5 (bm25) or PostgreSQL full-text (`ts_rank`).
This script measures, for each engine of `--engines` (SQLite and PostgreSQL by default), in one
run and on the same corpus:

(1) Ingestion rate, through hearth's real background path. For each engine a new empty database
    (`tests.support.fresh_database`: a temporary SQLite file, or a freshly created PostgreSQL
    database, dropped afterwards) is migrated to head (`app.core.db.migrate.upgrade`); a benchmark
    user and an other user are inserted. The documents' files are written under the user's
    file root and their `Upload` rows inserted as `pending` (sniffed type, real size and
    SHA-256), as an upload does; that staging is not timed. Then, timed with
    `time.perf_counter`: every upload of a set is `Ingestor.submit`ted (with its owner, as the
    upload route does) and `await Ingestor.idle()` waits for all of them. Two sets, one after
    the other: first the PDFs (into an empty index; the timing includes starting the worker
    processes, about 0.2 s, as a fresh server's first ingestions do), then the Markdown
    documents (on top of them).
    Reported: PDF pages per second (and chunks/s, MiB/s of PDF); Markdown chunks per second and
    MiB/s of text. The files were just written, so they are read from the page cache: the
    figures are hearth's work (extraction, chunking, inserts and index maintenance), not the
    disk's. For context, the extraction and chunking alone (`app.knowledge.extract.extract` on
    the same files, in this process, one thread, no database) is timed once before the engines
    run.
    No target: figures only.

(2) Search latency over an index of at least `--chunks` passages (10,000). The corpus is
    `tests.knowledge.corpus.generate` (Markdown documents of 300 paragraphs of filler prose
    from a fixed vocabulary, a heading every 5 paragraphs, a planted fact every 4 paragraphs;
    about 0.46 chunks per paragraph because chunks never span a heading). Its first documents
    stay Markdown until `app.knowledge.chunking` says they give at least `--chunks` chunks;
    the following ones are rendered to PDF with fpdf2 (headings in bold, one `multi_cell` per
    paragraph, A4, Helvetica 11) until there are at least `--pdf-pages` pages (300). Rendering
    is slow (~25 ms a page), so it is done once, before the engines run, and not timed. After
    ingestion the script counts the benchmark user's `knowledge_chunks` rows and prints the
    count. The figures are taken with planner statistics: on PostgreSQL the script runs
    `ANALYZE knowledge_chunks, uploads` first (what autovacuum does within a minute or so of
    such a load; hearth never runs it itself). Without statistics PostgreSQL picks another
    plan, so it is also timed as ingested, before that ANALYZE, on the first
    `BEFORE_ANALYZE` (100) queries of the list after the same warm-up, and the report says
    whether autovacuum had analyzed the table by then. SQLite gets nothing (hearth never runs
    ANALYZE there and SQLite has no automatic one).
    The queries (`--queries`, 400), the same seeded list for both engines: three quarters of
    them (300) are the questions of a random sample of the planted facts (Markdown and PDF
    facts alike), the other quarter (100, a third as many) 2-5 random filler words, shuffled
    together. Each is `await search(session, user_id, query, 5)` on one
    `AsyncSession` kept open for the whole run (no pool checkout, no new transaction per query,
    unlike hearth's tool, which opens a session per search), after 20 warm-up queries (other
    facts' questions and filler words). Each query is timed with `time.perf_counter_ns`.
    Reported: p50, p90, p99 and max in ms, for all queries and per kind. No target.

(3) Recall@5 of the planted facts: over the sampled facts' questions, the share of facts whose
    planted sentence is inside the text of one of the 5 passages returned
    (`tests.knowledge.corpus.recall_at`). The questions are worded unlike the sentences (other
    inflections, other word order), so the engine has to stem and rank. Also printed: how many
    of the sampled sentences are whole in some passage at all (a sentence cut by a PDF page
    break cannot be found whole; chunks never span pages), the misses per kind of question,
    and a few of them with what was found first.
    Target: recall@5 >= 0.9 on each engine (PASS/FAIL printed beside the figure).

Isolation: the other user gets 4 Markdown documents of notes about the very entities of the
sampled facts, each note repeating the fact's question word for word (so their passages would
rank first if they leaked). They are ingested after the timed sets. Every hit of the benchmark
user's searches (warm-up included) must belong to one of that user's own uploads: the count of
foreign hits is printed and must be 0. To show the check is not vacuous, the other user's own
searches for 20 of the same questions must find the other user's notes.

Machine information (CPUs, Python, SQLite, PostgreSQL server) comes first, elapsed time per
phase is printed, and a summary table ends the report. The exit status is 0 whatever the
verdicts: it is a measurement. An engine whose database does not answer is reported as skipped.

    .venv/bin/python bench/knowledge.py
    .venv/bin/python bench/knowledge.py --engines sqlite --chunks 20000 --json figures.json
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import math
import os
import platform
import random
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from importlib.metadata import version
from io import BytesIO
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _figures import add_json_option, write_figures
from fpdf import FPDF
from fpdf.enums import XPos, YPos
from pypdf import PdfReader
from sqlalchemy import func, select, text
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from app.core.db.engine import create_engine, session_factory
from app.core.db.migrate import upgrade
from app.files.roots import user_root
from app.files.sniff import SNIFF_BYTES, sniff
from app.knowledge.chunking import chunk_text, looks_like_markdown
from app.knowledge.extract import extract
from app.knowledge.ingest import CONCURRENCY, Ingestor, is_document
from app.knowledge.search import Hit, search
from app.models import KnowledgeChunk, Upload, User
from tests.knowledge.corpus import ATTRIBUTES, FILLER, Fact, generate, recall_at
from tests.support import PG_ADMIN_URL, fresh_database, pg_available

MiB = 1 << 20
ENGINES = ("sqlite", "postgresql")
SEED = 20_241_130
PARAGRAPHS = 300
"""Paragraphs per generated document (Markdown or PDF)."""
FACTS_EVERY = 4
LIMIT = 5
WARMUP = 20
RECALL_TARGET = 0.9
FOREIGN_DOCUMENTS = 4
FOREIGN_CHECKS = 20
CHUNKS_PER_DOCUMENT = 120
"""A low guess of the chunks of a generated Markdown document, to size the first corpus."""
PAGES_PER_DOCUMENT = 30
"""A low guess of the pages of a generated document rendered to PDF."""
MISSES_SHOWN = 3
BEFORE_ANALYZE = 100
"""Queries timed on PostgreSQL before ANALYZE (the first of the timed list)."""


# ============================================================================================
# The corpus: Markdown documents, PDFs rendered from further documents, the other user's notes.
# ============================================================================================


@dataclass(frozen=True)
class Document:
    filename: str
    data: bytes
    pages: int = 0
    """PDF pages; 0 for text."""


@dataclass
class Corpus:
    texts: list[Document]
    pdfs: list[Document]
    text_facts: list[Fact]
    pdf_facts: list[Fact]
    expected_text_chunks: int


def render_pdf(markdown: str) -> bytes:
    """A generated Markdown document as a PDF: headings in bold, one `multi_cell` a paragraph."""
    document = FPDF(format="A4")
    document.set_auto_page_break(auto=True, margin=15)
    document.add_page()
    for block in markdown.split("\n\n"):
        block = block.strip()
        if not block:
            continue
        if block.startswith("#"):
            document.set_font("helvetica", "B", 13)
            document.multi_cell(
                0, 7, block.lstrip("#").strip(), new_x=XPos.LMARGIN, new_y=YPos.NEXT
            )
        else:
            document.set_font("helvetica", size=11)
            document.multi_cell(0, 6, block, new_x=XPos.LMARGIN, new_y=YPos.NEXT)
        document.ln(3)
    return bytes(document.output())


def pdf_pages(data: bytes) -> int:
    return len(PdfReader(BytesIO(data)).pages)


def build_corpus(chunks: int, pages: int, seed: int) -> Corpus:
    """Markdown documents until they give `chunks` chunks, then PDFs until `pages` pages.

    `generate` draws every document from one seeded stream in order, so a larger corpus starts
    with the same documents as a smaller one: when the first guess is short, a larger one
    continues where it stopped."""
    wanted = math.ceil(chunks / CHUNKS_PER_DOCUMENT) + math.ceil(pages / PAGES_PER_DOCUMENT) + 2
    generated = generate(wanted, PARAGRAPHS, FACTS_EVERY, seed)
    texts: list[Document] = []
    pdfs: list[Document] = []
    text_indices: set[int] = set()
    pdf_indices: set[int] = set()
    total_chunks = 0
    total_pages = 0
    index = 0
    while total_chunks < chunks or total_pages < pages:
        if index >= len(generated.documents):
            wanted *= 2
            larger = generate(wanted, PARAGRAPHS, FACTS_EVERY, seed)
            assert larger.documents[:index] == generated.documents[:index]
            generated = larger
        filename, body = generated.documents[index]
        if total_chunks < chunks:
            total_chunks += len(chunk_text(body, markdown=looks_like_markdown(filename, body)))
            texts.append(Document(filename, body.encode()))
            text_indices.add(index)
        else:
            data = render_pdf(body)
            count = pdf_pages(data)
            total_pages += count
            pdfs.append(Document(filename.removesuffix(".md") + ".pdf", data, count))
            pdf_indices.add(index)
        index += 1
    return Corpus(
        texts=texts,
        pdfs=pdfs,
        text_facts=[f for f in generated.facts if f.document in text_indices],
        pdf_facts=[f for f in generated.facts if f.document in pdf_indices],
        expected_text_chunks=total_chunks,
    )


def foreign_notes(facts: Sequence[Fact]) -> list[Document]:
    """The other user's documents: a note per fact naming its entity and asking its question."""
    documents: list[Document] = []
    per_document = math.ceil(len(facts) / FOREIGN_DOCUMENTS)
    for n in range(FOREIGN_DOCUMENTS):
        blocks = [f"# Notes {n + 1}"]
        for m, fact in enumerate(facts[n * per_document : (n + 1) * per_document]):
            if m % 5 == 0:
                blocks.append(f"## Open questions {m // 5 + 1}")
            entity = fact.entity[0].upper() + fact.entity[1:]
            blocks.append(
                f"{fact.question} {entity} is on our list as well; "
                f"nobody here knows the answer about {fact.entity} yet."
            )
        documents.append(Document(f"notes-{n + 1}.md", ("\n\n".join(blocks) + "\n").encode()))
    return documents


@dataclass(frozen=True)
class Query:
    kind: str
    """`fact` or `filler`."""
    text: str
    fact: Fact | None = None
    source: str = ""
    """`text` or `pdf` for a fact."""


@dataclass
class Workload:
    warmup: list[Query]
    queries: list[Query]
    facts: list[Query]
    foreign: list[Document]


def build_workload(corpus: Corpus, queries: int, seed: int) -> Workload:
    rng = random.Random(seed)
    tagged = [(f, "text") for f in corpus.text_facts] + [(f, "pdf") for f in corpus.pdf_facts]
    n_facts = min(round(queries * 3 / 4), len(tagged) - WARMUP // 2)
    n_filler = queries - n_facts
    picked = rng.sample(range(len(tagged)), n_facts + WARMUP // 2)
    facts = [Query("fact", tagged[i][0].question, *tagged[i]) for i in picked[:n_facts]]

    def filler() -> Query:
        return Query("filler", " ".join(rng.choice(FILLER) for _ in range(rng.randint(2, 5))))

    warmup = [Query("fact", tagged[i][0].question, *tagged[i]) for i in picked[n_facts:]]
    warmup += [filler() for _ in range(WARMUP - len(warmup))]
    timed = facts + [filler() for _ in range(n_filler)]
    rng.shuffle(timed)
    rng.shuffle(warmup)
    return Workload(warmup, timed, facts, foreign_notes([q.fact for q in facts if q.fact]))


def time_extraction(corpus: Corpus, folder: Path) -> tuple[float, float, int, int]:
    """Seconds to extract and chunk the PDFs and the texts, one thread, no database."""
    folder.mkdir(parents=True, exist_ok=True)
    seconds: list[float] = []
    counts: list[int] = []
    for documents, mime in ((corpus.pdfs, "application/pdf"), (corpus.texts, "text/plain")):
        paths = []
        for document in documents:
            path = folder / document.filename
            path.write_bytes(document.data)
            paths.append(path)
        started = time.perf_counter()
        counts.append(sum(len(extract(p, p.name, mime)) for p in paths))
        seconds.append(time.perf_counter() - started)
    return seconds[0], seconds[1], counts[0], counts[1]


# ============================================================================================
# One engine: a fresh database, staged uploads, timed ingestion, timed searches.
# ============================================================================================


def quantile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    position = (len(ordered) - 1) * q
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def latency(values: Sequence[float]) -> dict[str, float]:
    return {
        "p50": quantile(values, 0.5),
        "p90": quantile(values, 0.9),
        "p99": quantile(values, 0.99),
        "max": max(values),
        "mean": statistics.fmean(values),
    }


@dataclass
class Ingestion:
    files: int
    bytes: int
    seconds: float
    chunks: int = 0
    pages: int = 0
    ready: int = 0


@dataclass
class EngineResult:
    engine: str
    server: str
    phases: dict[str, float] = field(default_factory=dict)
    pdf: Ingestion | None = None
    text: Ingestion | None = None
    foreign: Ingestion | None = None
    statuses: dict[str, int] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    chunks_total: int = 0
    chunks_user: int = 0
    latencies: dict[str, list[float]] = field(default_factory=dict)
    before_analyze: list[float] = field(default_factory=list)
    autoanalyzed: bool = False
    recall: float = 0.0
    recall_by_source: dict[str, tuple[int, int]] = field(default_factory=dict)
    whole: int = 0
    cut: set[str] = field(default_factory=set)
    """Sampled fact sentences that are whole in no passage."""
    misses: list[tuple[Query, str]] = field(default_factory=list)
    searches: int = 0
    hits: int = 0
    foreign_hits: int = 0
    foreign_found: int = 0
    skipped: str = ""

    @property
    def passed(self) -> bool:
        return not self.skipped and self.recall >= RECALL_TARGET


async def add_user(sessions: async_sessionmaker[AsyncSession], name: str) -> uuid.UUID:
    user = User(
        email=f"{name}-{uuid.uuid4().hex[:8]}@bench.invalid",
        password_hash="x",
        display_name=name,
        is_admin=False,
        created_at=datetime.now(UTC),
    )
    async with sessions() as db:
        db.add(user)
        await db.commit()
        return user.id


def write_files(root: Path, files: Sequence[tuple[str, bytes]]) -> None:
    for relative, data in files:
        path = root / relative
        path.parent.mkdir(parents=True)
        path.write_bytes(data)


async def stage(
    sessions: async_sessionmaker[AsyncSession],
    data_dir: Path,
    owner: uuid.UUID,
    documents: Sequence[Document],
) -> list[uuid.UUID]:
    """Files under the owner's root and `pending` upload rows, as an upload leaves them."""
    ids: list[uuid.UUID] = []
    rows: list[Upload] = []
    files: list[tuple[str, bytes]] = []
    now = datetime.now(UTC)
    for n, document in enumerate(documents):
        upload_id = uuid.uuid4()
        relative = f"uploads/{upload_id}/{document.filename}"
        files.append((relative, document.data))
        mime = sniff(document.data[:SNIFF_BYTES])
        if not is_document(mime):
            raise RuntimeError(f"{document.filename} sniffed as {mime}, not a document")
        rows.append(
            Upload(
                id=upload_id,
                user_id=owner,
                filename=document.filename,
                stored_path=relative,
                mime=mime,
                size=len(document.data),
                sha256=hashlib.sha256(document.data).hexdigest(),
                created_at=now + timedelta(microseconds=n),
                ingest_status="pending",
            )
        )
        ids.append(upload_id)
    root = await asyncio.to_thread(user_root, data_dir, owner)
    await asyncio.to_thread(write_files, root, files)
    async with sessions() as db:
        db.add_all(rows)
        await db.commit()
    return ids


async def ingest_all(
    ingestor: Ingestor, owner: uuid.UUID, upload_ids: Sequence[uuid.UUID]
) -> float:
    """Seconds from submitting every upload to the last ingestion's end."""
    started = time.perf_counter()
    for upload_id in upload_ids:
        ingestor.submit(upload_id, owner)
    await ingestor.idle()
    return time.perf_counter() - started


async def settle(
    sessions: async_sessionmaker[AsyncSession], ingestion: Ingestion, ids: Sequence[uuid.UUID]
) -> list[str]:
    """Fill in the chunk and ready counts of a set; the failures' reasons."""
    async with sessions() as db:
        ingestion.chunks = (
            await db.scalar(
                select(func.count())
                .select_from(KnowledgeChunk)
                .where(KnowledgeChunk.upload_id.in_(ids))
            )
        ) or 0
        rows = (
            await db.execute(
                select(Upload.filename, Upload.ingest_status, Upload.ingest_error).where(
                    Upload.id.in_(ids)
                )
            )
        ).all()
    ingestion.ready = sum(status == "ready" for _, status, _ in rows)
    return [f"{name}: {status} ({error})" for name, status, error in rows if status != "ready"]


async def server_version(engine_name: str) -> str:
    if engine_name == "sqlite":
        return f"SQLite {sqlite3.sqlite_version}"
    if not await pg_available():
        return ""
    engine = create_engine(PG_ADMIN_URL)
    try:
        async with engine.connect() as connection:
            return "PostgreSQL " + str(await connection.scalar(text("SHOW server_version")))
    finally:
        await engine.dispose()


def question_kind(question: str) -> str:
    """The attribute a planted fact's question asks about (`access code`, `mascot`, ...)."""
    for attribute, template, _ in ATTRIBUTES:
        if question.startswith(template.split("{e}")[0]) and question.endswith(
            template.split("{e}")[1]
        ):
            return attribute
    return "?"


def describe(top: Hit | None, pdfs: set[uuid.UUID]) -> str:
    """What a missed question found first."""
    if top is None:
        return "nothing found"
    where = f"PDF page {top.page}" if top.upload_id in pdfs else str(top.heading)
    return f"top hit ({where}): {top.text[:80]!r}..."


async def run_engine(
    engine_name: str, corpus: Corpus, workload: Workload, folder: Path
) -> EngineResult:
    server = await server_version(engine_name)
    result = EngineResult(engine_name, server)
    if not server:
        result.skipped = f"PostgreSQL does not answer at {PG_ADMIN_URL}"
        return result
    await asyncio.to_thread(folder.mkdir, parents=True, exist_ok=True)
    async with fresh_database(engine_name, folder) as url:
        engine = create_engine(url)
        try:
            await measure(result, engine_name, engine, corpus, workload, folder / "data")
        finally:
            await engine.dispose()
    return result


async def measure(
    result: EngineResult,
    engine_name: str,
    engine: AsyncEngine,
    corpus: Corpus,
    workload: Workload,
    data_dir: Path,
) -> None:
    phases = result.phases
    mark = time.perf_counter()

    def lap(name: str) -> None:
        nonlocal mark
        now = time.perf_counter()
        phases[name] = now - mark
        mark = now

    await upgrade(engine)
    sessions = session_factory(engine)
    lap("migrate")

    owner = await add_user(sessions, "bench")
    other = await add_user(sessions, "other")
    pdf_ids = await stage(sessions, data_dir, owner, corpus.pdfs)
    text_ids = await stage(sessions, data_dir, owner, corpus.texts)
    foreign_ids = await stage(sessions, data_dir, other, workload.foreign)
    lap("stage")

    ingestor = Ingestor(sessions, data_dir)
    try:
        pdf = Ingestion(
            len(pdf_ids),
            sum(len(d.data) for d in corpus.pdfs),
            await ingest_all(ingestor, owner, pdf_ids),
            pages=sum(d.pages for d in corpus.pdfs),
        )
        lap("ingest PDF")
        txt = Ingestion(
            len(text_ids),
            sum(len(d.data) for d in corpus.texts),
            await ingest_all(ingestor, owner, text_ids),
        )
        lap("ingest text")
        foreign = Ingestion(
            len(foreign_ids),
            sum(len(d.data) for d in workload.foreign),
            await ingest_all(ingestor, other, foreign_ids),
        )
        lap("ingest other user")
    finally:
        await ingestor.close()
    for ingestion, ids in ((pdf, pdf_ids), (txt, text_ids), (foreign, foreign_ids)):
        result.failures += await settle(sessions, ingestion, ids)
    result.pdf, result.text, result.foreign = pdf, txt, foreign
    async with sessions() as db:
        result.chunks_total = (
            await db.scalar(select(func.count()).select_from(KnowledgeChunk))
        ) or 0
        result.chunks_user = (
            await db.scalar(
                select(func.count())
                .select_from(KnowledgeChunk)
                .where(KnowledgeChunk.user_id == owner)
            )
        ) or 0
        statuses = await db.execute(
            select(Upload.ingest_status, func.count()).group_by(Upload.ingest_status)
        )
        result.statuses = {str(status): int(n) for status, n in statuses.all()}
        passages = (
            await db.scalars(select(KnowledgeChunk.text).where(KnowledgeChunk.user_id == owner))
        ).all()
    sentences = [q.fact.sentence for q in workload.facts if q.fact]
    joined = "\x00".join(passages)  # no sentence contains NUL, so no match spans two passages
    result.cut = {sentence for sentence in sentences if sentence not in joined}
    result.whole = len(sentences) - len(result.cut)
    del passages, joined
    lap("count")

    own = set(pdf_ids) | set(text_ids)
    if engine_name == "postgresql":
        # As ingested (no statistics yet: hearth never runs ANALYZE), on part of the queries,
        # then ANALYZE, as autovacuum would do within a minute or so of such a load.
        async with sessions() as db:
            await run_queries(db, owner, workload.warmup, own, result)
            before = await run_queries(db, owner, workload.queries[:BEFORE_ANALYZE], own, result)
        result.before_analyze = [elapsed for _, _, elapsed in before]
        async with engine.connect() as connection:
            result.autoanalyzed = bool(
                await connection.scalar(
                    text(
                        "SELECT last_autoanalyze IS NOT NULL FROM pg_stat_user_tables "
                        "WHERE relname = 'knowledge_chunks'"
                    )
                )
            )
            await connection.execute(text("ANALYZE knowledge_chunks"))
            await connection.execute(text("ANALYZE uploads"))
            await connection.commit()
        lap("search before ANALYZE + ANALYZE")

    pdf_set = set(pdf_ids)
    found: list[list[str]] = []
    asked: list[Query] = []
    times: dict[str, list[float]] = {"all": [], "fact": [], "filler": []}
    async with sessions() as db:
        await run_queries(db, owner, workload.warmup, own, result)
        for query, hits, elapsed in await run_queries(db, owner, workload.queries, own, result):
            times["all"].append(elapsed)
            times[query.kind].append(elapsed)
            if query.fact is not None:
                found.append([hit.text for hit in hits])
                asked.append(query)
                if not any(query.fact.sentence in hit.text for hit in hits):
                    result.misses.append((query, describe(hits[0] if hits else None, pdf_set)))
        lap("search")
        foreign_set = set(foreign_ids)
        for query in workload.facts[:FOREIGN_CHECKS]:
            hits = await search(db, other, query.text, LIMIT)
            result.foreign_found += bool(hits) and all(h.upload_id in foreign_set for h in hits)
    result.latencies = times
    result.recall = recall_at(LIMIT, found, [q.fact for q in asked if q.fact])
    for source in ("text", "pdf"):
        pairs = [(f, q) for f, q in zip(found, asked, strict=True) if q.source == source]
        hit = sum(any(q.fact.sentence in t for t in f) for f, q in pairs if q.fact)
        result.recall_by_source[source] = (hit, len(pairs))
    lap("isolation check")


async def run_queries(
    db: AsyncSession,
    owner: uuid.UUID,
    queries: Sequence[Query],
    own: set[uuid.UUID],
    result: EngineResult,
) -> list[tuple[Query, list[Hit], float]]:
    """Each query searched and timed in turn (ms); every hit checked to be the owner's own."""
    answers: list[tuple[Query, list[Hit], float]] = []
    for query in queries:
        started = time.perf_counter_ns()
        hits = await search(db, owner, query.text, LIMIT)
        elapsed = (time.perf_counter_ns() - started) / 1e6
        answers.append((query, hits, elapsed))
        result.searches += 1
        result.hits += len(hits)
        result.foreign_hits += sum(hit.upload_id not in own for hit in hits)
    return answers


# ============================================================================================
# The report.
# ============================================================================================


def rate(n: float, seconds: float) -> float:
    return n / seconds if seconds > 0 else float("nan")


def report_engine(result: EngineResult, corpus: Corpus, workload: Workload) -> None:
    print(f"\n== {result.engine} ({result.server or 'not reachable'}) ==")
    if result.skipped:
        print(f"  SKIPPED: {result.skipped}")
        return
    assert result.pdf and result.text and result.foreign
    pdf, txt, foreign = result.pdf, result.text, result.foreign
    print(f"  ingestion (Ingestor.submit for every upload, then idle(); {CONCURRENCY} at once):")
    print(
        f"    PDF          {pdf.files:>4} files {pdf.pages:>6,} pages {pdf.chunks:>7,} chunks "
        f"{pdf.bytes / MiB:>6.2f} MiB {pdf.seconds:>7.2f} s   "
        f"{rate(pdf.pages, pdf.seconds):>7.1f} pages/s  ({rate(pdf.chunks, pdf.seconds):,.0f} "
        f"chunks/s, {rate(pdf.bytes / MiB, pdf.seconds):.2f} MiB/s)"
    )
    print(
        f"    Markdown     {txt.files:>4} files {'':>12} {txt.chunks:>7,} chunks "
        f"{txt.bytes / MiB:>6.2f} MiB {txt.seconds:>7.2f} s   "
        f"{rate(txt.chunks, txt.seconds):>7,.0f} chunks/s "
        f"({rate(txt.bytes / MiB, txt.seconds):.2f} MiB/s)"
    )
    print(
        f"    other user   {foreign.files:>4} files {'':>12} {foreign.chunks:>7,} chunks "
        f"{foreign.bytes / MiB:>6.2f} MiB {foreign.seconds:>7.2f} s   (isolation check only)"
    )
    expected = "" if txt.chunks == corpus.expected_text_chunks else " (chunker said otherwise!)"
    print(
        f"  index: {result.chunks_total:,} knowledge_chunks rows; the benchmark user's "
        f"{result.chunks_user:,} (Markdown {txt.chunks:,}{expected}, PDF {pdf.chunks:,}), "
        f"the other user's {foreign.chunks:,}"
    )
    statuses = ", ".join(f"{n} {status}" for status, n in sorted(result.statuses.items()))
    print(f"  uploads: {statuses}")
    for failure in result.failures[:5]:
        print(f"    NOT READY {failure}")
    times = result.latencies
    print(
        f"  search: {len(times['all'])} queries ({len(times['fact'])} fact questions, "
        f"{len(times['filler'])} filler), limit {LIMIT}, one open session, after {WARMUP} "
        "warm-up queries; ms"
    )
    print(f"    {'':<8}{'p50':>8}{'p90':>8}{'p99':>8}{'max':>8}{'mean':>8}")
    for kind in ("all", "fact", "filler"):
        if times[kind]:
            figures = latency(times[kind])
            print(
                f"    {kind:<8}"
                + "".join(f"{figures[k]:>8.2f}" for k in ("p50", "p90", "p99", "max", "mean"))
            )
    if result.before_analyze:
        figures = latency(result.before_analyze)
        print(
            f"    the first {len(result.before_analyze)} queries as ingested, before ANALYZE: "
            + ", ".join(f"{k} {figures[k]:.2f}" for k in ("p50", "p90", "p99", "max"))
            + (
                " (autovacuum had analyzed the table meanwhile!)"
                if result.autoanalyzed
                else " (no statistics: autovacuum had not analyzed the table yet)"
            )
        )
    by_source = ", ".join(
        f"{'Markdown' if source == 'text' else 'PDF'} {h}/{n}" + (f" = {h / n:.3f}" if n else "")
        for source, (h, n) in result.recall_by_source.items()
    )
    n_facts = len(times["fact"])
    print(
        f"  recall@5 {result.recall:.3f} ({n_facts - len(result.misses)}/{n_facts}; {by_source})"
        f"  {'PASS' if result.passed else 'FAIL'} (target >= {RECALL_TARGET})"
    )
    print(f"    sampled fact sentences whole in some passage: {result.whole}/{n_facts}")
    if result.misses:
        kinds = Counter(question_kind(query.text) for query, _ in result.misses)
        print(
            "    misses by question: "
            + ", ".join(f"{kind} {n}" for kind, n in kinds.most_common())
            + f" (of {n_facts}: "
            + ", ".join(
                f"{kind} {n}"
                for kind, n in Counter(question_kind(q.text) for q in workload.facts).most_common()
            )
            + ")"
        )
    for query, where in result.misses[:MISSES_SHOWN]:
        assert query.fact is not None
        cut = " [sentence whole in no passage]" if query.fact.sentence in result.cut else ""
        print(f"    missed ({query.source}){cut}: {query.text!r} -> {where}")
    if len(result.misses) > MISSES_SHOWN:
        print(f"    ... and {len(result.misses) - MISSES_SHOWN} more misses")
    print(
        f"  isolation: {result.foreign_hits} foreign hits in {result.searches} searches "
        f"({result.hits:,} hits) {'OK' if result.foreign_hits == 0 else 'LEAK'}; the other "
        f"user's own searches for {FOREIGN_CHECKS} of the same questions found only its notes: "
        f"{result.foreign_found}/{FOREIGN_CHECKS}"
    )
    print(
        "  phases: "
        + ", ".join(f"{name} {seconds:.1f} s" for name, seconds in result.phases.items())
    )


def report_summary(results: Sequence[EngineResult]) -> None:
    print("\nsummary")
    header = (
        f"  {'engine':<12}{'PDF pages/s':>12}{'md chunks/s':>12}{'md MiB/s':>10}{'chunks':>9}"
        f"{'p50 ms':>9}{'p99 ms':>9}{'recall@5':>10}  {'verdict':<8}{'foreign':>8}"
    )
    print(header)
    for r in results:
        if r.skipped or not r.pdf or not r.text:
            print(f"  {r.engine:<12}{'skipped':>12}")
            continue
        figures = latency(r.latencies["all"])
        print(
            f"  {r.engine:<12}{rate(r.pdf.pages, r.pdf.seconds):>12.1f}"
            f"{rate(r.text.chunks, r.text.seconds):>12,.0f}"
            f"{rate(r.text.bytes / MiB, r.text.seconds):>10.2f}{r.chunks_user:>9,}"
            f"{figures['p50']:>9.2f}{figures['p99']:>9.2f}{r.recall:>10.3f}  "
            f"{'PASS' if r.passed else 'FAIL':<8}{r.foreign_hits:>8}"
        )


def dump(result: EngineResult) -> dict[str, Any]:
    if result.skipped or not result.pdf or not result.text:
        return {"skipped": result.skipped}
    return {
        "server": result.server,
        "ingest_pdf": {
            "files": result.pdf.files,
            "pages": result.pdf.pages,
            "chunks": result.pdf.chunks,
            "seconds": result.pdf.seconds,
            "pages_per_s": rate(result.pdf.pages, result.pdf.seconds),
        },
        "ingest_text": {
            "files": result.text.files,
            "chunks": result.text.chunks,
            "bytes": result.text.bytes,
            "seconds": result.text.seconds,
            "chunks_per_s": rate(result.text.chunks, result.text.seconds),
            "mib_per_s": rate(result.text.bytes / MiB, result.text.seconds),
        },
        "chunks_user": result.chunks_user,
        "chunks_total": result.chunks_total,
        "search_ms": {k: latency(v) for k, v in result.latencies.items() if v},
        "search_ms_before_analyze": (
            latency(result.before_analyze) if result.before_analyze else None
        ),
        "recall_at_5": result.recall,
        "recall_pass": result.passed,
        "foreign_hits": result.foreign_hits,
        "phases_s": result.phases,
    }


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    started = time.monotonic()
    engines: list[str] = args.engines
    servers = {name: await server_version(name) for name in engines}
    cpus = os.cpu_count() or 0
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else cpus
    print(
        f"hearth knowledge search: {platform.machine()}, {cpus} CPUs ({usable} usable), "
        f"{platform.platform()}\n  Python {platform.python_version()}, SQLite "
        f"{sqlite3.sqlite_version}, "
        + (servers.get("postgresql") or "PostgreSQL not reachable")
        + f", pypdf {version('pypdf')}, fpdf2 {version('fpdf2')}, SQLAlchemy "
        f"{version('sqlalchemy')}"
    )
    if args.chunks < 10_000 or args.queries < 300:
        print("  note: below 10,000 chunks or 300 queries, this is a smoke run, not the bench")

    mark = time.perf_counter()
    corpus = build_corpus(args.chunks, args.pdf_pages, args.seed)
    workload = build_workload(corpus, args.queries, args.seed)
    generated = time.perf_counter() - mark
    text_mib = sum(len(d.data) for d in corpus.texts) / MiB
    pages = sum(d.pages for d in corpus.pdfs)
    print(
        f"corpus (seed {args.seed}, not timed, {generated:.1f} s): {len(corpus.texts)} Markdown "
        f"documents ({text_mib:.1f} MiB, {len(corpus.texts) * PARAGRAPHS:,} paragraphs, "
        f"{corpus.expected_text_chunks:,} chunks by the chunker, {len(corpus.text_facts):,} "
        f"facts) + {len(corpus.pdfs)} PDF documents ({pages} pages, "
        f"{len(corpus.pdf_facts)} facts); "
        f"other user: {len(workload.foreign)} documents of notes on {len(workload.facts)} "
        "sampled facts' entities"
    )
    with tempfile.TemporaryDirectory(prefix="hearth-bench-knowledge-") as tmp:
        folder = Path(tmp)
        pdf_s, text_s, pdf_chunks, text_chunks = time_extraction(corpus, folder / "extract")
        print(
            f"extraction + chunking alone (one thread, no database): PDF {pdf_s:.2f} s = "
            f"{rate(pages, pdf_s):.0f} pages/s ({pdf_chunks:,} chunks); Markdown {text_s:.2f} s "
            f"= {rate(text_chunks, text_s):,.0f} chunks/s, {rate(text_mib, text_s):.1f} MiB/s"
        )
        results = []
        for name in engines:
            result = await run_engine(name, corpus, workload, folder / name)
            report_engine(result, corpus, workload)
            results.append(result)
    report_summary(results)
    verdicts = ", ".join(
        f"{r.engine} {'skipped' if r.skipped else 'PASS' if r.passed else 'FAIL'}" for r in results
    )
    print(
        f"recall@5 target >= {RECALL_TARGET}: {verdicts}; total {time.monotonic() - started:.1f} s"
    )
    return {r.engine: dump(r) for r in results}


def engines_list(value: str) -> list[str]:
    names = [name.strip() for name in value.split(",") if name.strip()]
    unknown = [name for name in names if name not in ENGINES]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"engines are among {', '.join(ENGINES)}")
    return list(dict.fromkeys(names))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
    parser.add_argument(
        "--engines",
        type=engines_list,
        default=list(ENGINES),
        help="comma-separated databases to measure (default: sqlite,postgresql)",
    )
    parser.add_argument(
        "--chunks", type=int, default=10_000, help="at least this many Markdown chunks indexed"
    )
    parser.add_argument(
        "--pdf-pages", type=int, default=300, help="at least this many PDF pages ingested"
    )
    parser.add_argument(
        "--queries", type=int, default=400, help="timed searches (3/4 fact questions)"
    )
    parser.add_argument("--seed", type=int, default=SEED)
    add_json_option(parser)
    args = parser.parse_args(argv)
    if args.chunks < 100 or args.pdf_pages < 1 or args.queries < 40:
        parser.error("--chunks >= 100, --pdf-pages >= 1 and --queries >= 40, please")
    figures = asyncio.run(main_async(args))
    write_figures(figures, args.json)


if __name__ == "__main__":
    main()

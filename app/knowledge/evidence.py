"""Evidence records: what each question retrieved and cited, and what follows from them.

The knowledge tools report what they found or declared in their return's metadata
(`EVIDENCE_KEY`); the recorder, which knows the round, writes the rows (`record`), each with its
question (the user message that started it) and its epoch (the assistant message of the round,
so equal epochs mean one model request). Everything a user sees is derived from these rows when
it is read, never stored beside them:

- the citation status of a question — `None` when it retrieved nothing; `missing` when no
  declaration came after its latest retrieval; otherwise `grounded` if it ever cited a passage,
  `ungrounded` if it only declared that nothing grounds the answer. A declaration is a row, and
  a cite writes rows only for ids that resolved, so one whose ids all failed counts for nothing;
  an empty cite after a grounded one never weakens it;
- the citations of a question: every passage it cited, in the order first cited;
- the capsule: all passages cited in earlier questions, grouped by the latest question that
  cited each, in full, for request-time compaction (`app.agent.capabilities.compaction`).

Everything is read along the chat's active path: a row counts when its epoch (its round) is on
the path, so an answer regenerated for the same question has evidence of its own, and another
branch's citations never show on this one.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, func, select
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession, async_sessionmaker

from app.core.db.retry import insert_once
from app.models import ChatEvidence, ChatLlmTool, KnowledgeChunk, Message, Upload
from app.models.paths import BOUND_PATH, active_path, on_path

EVIDENCE_KEY = "hearth_evidence"
"""ToolReturn metadata: `{"retrieved": [row ids]}`, `{"cited": [row ids]}` or
`{"declared_none": true}`."""
QUOTE_CHARS = 500
KNOWLEDGE_SEARCH = "knowledge_search"
KNOWLEDGE_CITE = "knowledge_cite"


@dataclass
class QuestionEvidence:
    """The question in progress, as its knowledge tools see it during a turn."""

    question_id: int
    budget: int
    """Searches allowed per question."""
    searches: int = 0
    """Searches asked for so far in this question (over the budget or not)."""
    retrieved: dict[str, int] = field(default_factory=dict)
    """chunk id -> row id of every passage this question retrieved."""

    @property
    def searches_spent(self) -> bool:
        return self.searches >= self.budget


async def load_question(
    db: AsyncSession, chat_id: uuid.UUID, question_id: int, budget: int
) -> QuestionEvidence:
    """The question's evidence so far on the active path: nothing for a new question; a
    resumed one's own."""
    path = on_path(active_path(chat_id))
    retrieved = await db.execute(
        select(KnowledgeChunk.chunk_id, KnowledgeChunk.id)
        .join(ChatEvidence, ChatEvidence.chunk_row_id == KnowledgeChunk.id)
        .where(
            ChatEvidence.chat_id == chat_id,
            ChatEvidence.question_id == question_id,
            ChatEvidence.kind == "retrieved",
            ChatEvidence.epoch.in_(path),
        )
    )
    # Every message of the path after the question's user message belongs to it: the latest.
    searches = await db.scalar(
        select(func.count())
        .select_from(ChatLlmTool)
        .where(
            ChatLlmTool.message_id.in_(path),
            ChatLlmTool.message_id > question_id,
            ChatLlmTool.name == KNOWLEDGE_SEARCH,
        )
    )
    return QuestionEvidence(question_id, budget, searches or 0, dict(retrieved.all()))


async def record(
    sessions: async_sessionmaker[AsyncSession],
    *,
    chat_id: uuid.UUID,
    question_id: int,
    epoch: int,
    report: dict[str, Any],
    now: datetime,
) -> bool:
    """Write the rows a knowledge tool's report asks for; whether it cited anything."""

    def rows() -> list[ChatEvidence]:
        made = [
            ChatEvidence(
                chat_id=chat_id,
                question_id=question_id,
                epoch=epoch,
                kind=kind,
                chunk_row_id=row_id,
                created_at=now,
            )
            for kind in ("retrieved", "cited")
            for row_id in dict.fromkeys(report.get(kind, ()))
        ]
        if report.get("declared_none"):
            made.append(
                ChatEvidence(
                    chat_id=chat_id,
                    question_id=question_id,
                    epoch=epoch,
                    kind="declared_none",
                    created_at=now,
                )
            )
        return made

    stored = await insert_once(sessions, rows, what="recording evidence")
    return bool(stored) and bool(report.get("cited"))


# -- reading -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class EvidenceRow:
    question_id: int
    epoch: int
    kind: str
    chunk_id: str | None
    upload_id: uuid.UUID | None
    filename: str | None
    mime: str | None
    page: int | None
    heading: str | None
    text: str | None


_ROWS = (
    select(
        ChatEvidence.question_id,
        ChatEvidence.epoch,
        ChatEvidence.kind,
        KnowledgeChunk.chunk_id,
        KnowledgeChunk.upload_id,
        Upload.filename,
        Upload.mime,
        KnowledgeChunk.page,
        KnowledgeChunk.heading,
        KnowledgeChunk.text,
    )
    .outerjoin(KnowledgeChunk, KnowledgeChunk.id == ChatEvidence.chunk_row_id)
    .outerjoin(Upload, Upload.id == KnowledgeChunk.upload_id)
    .order_by(ChatEvidence.question_id, ChatEvidence.epoch, ChatEvidence.id)
)


_PATH_ROWS = _ROWS.where(
    ChatEvidence.chat_id == bindparam("chat_id"),
    ChatEvidence.epoch.in_(on_path(BOUND_PATH)),
)
_ROWS_BEFORE = _PATH_ROWS.where(ChatEvidence.question_id < bindparam("question"))
_ROWS_OF = _PATH_ROWS.where(ChatEvidence.question_id == bindparam("question"))
"""Built once: every turn reads them (`app.chats.repository` says why)."""


async def load_rows(
    db: AsyncSession | AsyncConnection,
    chat_id: uuid.UUID,
    *,
    before_question: int | None = None,
    question: int | None = None,
) -> list[EvidenceRow]:
    """The active path's evidence rows: all, those of one question, or of the questions before
    one (not both)."""
    if before_question is not None and question is not None:
        raise ValueError("rows of one question, or of the questions before one, not both")
    keys: dict[str, Any] = {"chat_id": chat_id}
    query = _PATH_ROWS
    if before_question is not None:
        query, keys["question"] = _ROWS_BEFORE, before_question
    elif question is not None:
        query, keys["question"] = _ROWS_OF, question
    # The selected columns are labelled as the fields are named.
    return [EvidenceRow(**row._asdict()) for row in (await db.execute(query, keys)).all()]


def by_question(rows: Iterable[EvidenceRow]) -> dict[int, list[EvidenceRow]]:
    grouped: dict[int, list[EvidenceRow]] = {}
    for row in rows:
        grouped.setdefault(row.question_id, []).append(row)
    return grouped


def citation_status(rows: Sequence[EvidenceRow]) -> str | None:
    """`missing`, `grounded`, `ungrounded`, or None for a question that retrieved nothing."""
    retrieved = [r.epoch for r in rows if r.kind == "retrieved"]
    if not retrieved:
        return None
    declared = [r.epoch for r in rows if r.kind in ("cited", "declared_none")]
    if not declared or max(retrieved) > max(declared):
        return "missing"
    return "grounded" if any(r.kind == "cited" for r in rows) else "ungrounded"


def citation(row: EvidenceRow) -> dict[str, Any]:
    return {
        "chunk_id": row.chunk_id,
        "upload_id": row.upload_id,
        "filename": row.filename,
        "page": row.page,
        "quote": (row.text or "")[:QUOTE_CHARS],
    }


def cited(rows: Iterable[EvidenceRow]) -> list[EvidenceRow]:
    """The passages cited, each once, in the order first cited."""
    seen: dict[str, EvidenceRow] = {}
    for row in rows:
        if row.kind == "cited" and row.chunk_id is not None and row.chunk_id not in seen:
            seen[row.chunk_id] = row
    return list(seen.values())


def citations(rows: Iterable[EvidenceRow]) -> list[dict[str, Any]]:
    return [citation(row) for row in cited(rows)]


def capsule(rows: Sequence[EvidenceRow], questions: dict[int, str]) -> str:
    """Every passage cited in the given (earlier) questions, in full, grouped by the latest
    question that cited it; `questions` maps question ids to their user message's text."""
    latest: dict[str, EvidenceRow] = {}
    for row in rows:  # ordered by question: later citations replace earlier ones
        if row.kind == "cited" and row.chunk_id is not None:
            latest.pop(row.chunk_id, None)
            latest[row.chunk_id] = row
    head = "[hearth/evidence] Passages cited in earlier questions"
    if not latest:
        return f"{head}: none. Their other search results are not shown."
    groups: dict[int, list[EvidenceRow]] = {}
    for row in sorted(latest.values(), key=lambda r: r.question_id):
        groups.setdefault(row.question_id, []).append(row)
    blocks = [f"{head}, in full (their other search results are not shown):"]
    for question_id, group in groups.items():
        asked = " ".join(questions.get(question_id, "").split())
        asked = asked if len(asked) <= 120 else asked[:119] + "…"
        blocks.append(f'Cited for the question "{asked}":')
        for row in group:
            source = row.filename or "a deleted document"
            if row.page is not None:
                source += f", page {row.page}"
            if row.heading:
                source += f", {row.heading}"
            blocks.append(f"[{row.chunk_id}] {source}\n{row.text}")
    return "\n\n".join(blocks)


async def earlier_capsule(db: AsyncSession, chat_id: uuid.UUID, question_id: int) -> str | None:
    """The capsule of the questions before `question_id` (None when they retrieved nothing)."""
    rows = await load_rows(db, chat_id, before_question=question_id)
    if not rows:
        return None
    ids = {row.question_id for row in rows if row.kind == "cited"}
    questions: dict[int, str] = {}
    if ids:
        found = await db.execute(select(Message.id, Message.content).where(Message.id.in_(ids)))
        questions = dict(found.all())
    return capsule(rows, questions)


async def question_views(
    connection: AsyncConnection, chat_id: uuid.UUID
) -> dict[int, tuple[str | None, list[dict[str, Any]]]]:
    """question id -> (citation status, citations) for every question of the active path with
    evidence."""
    return {
        question_id: (citation_status(rows), citations(rows))
        for question_id, rows in by_question(await load_rows(connection, chat_id)).items()
    }

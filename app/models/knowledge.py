"""The user's documents as searchable passages, and what each question retrieved and cited.

`knowledge_chunks` holds the passages; the full-text index over them differs per database
(SQLite FTS5, PostgreSQL tsvector + GIN), so it is created by its own Alembic revision and is
not part of these models (`app.knowledge.search` names those objects so that `alembic check`
leaves them alone).

`chat_evidence` is the record a question's citation status and citations are derived from:
one row per retrieved or cited chunk, with the question (the user message that started it) and
the epoch (the assistant message of the model round that made the call: one request per epoch,
so equal epochs mean one request). Rows go with their chat, and with the upload whose chunk
they point at.
"""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import ForeignKey, Index, Integer, String, Text, UniqueConstraint, Uuid
from sqlalchemy.orm import Mapped, mapped_column

from app.core.db.base import Base
from app.core.db.types import BigId, UTCDateTime


class KnowledgeChunk(Base):
    __tablename__ = "knowledge_chunks"
    __table_args__ = (UniqueConstraint("user_id", "chunk_id"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    user_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    upload_id: Mapped[uuid.UUID] = mapped_column(
        Uuid, ForeignKey("uploads.id", ondelete="CASCADE"), index=True
    )
    chunk_id: Mapped[str] = mapped_column(String(64))
    """Stable: the upload's id and the passage's place in it, the same on every ingestion."""
    ordinal: Mapped[int] = mapped_column(Integer)
    page: Mapped[int | None] = mapped_column(Integer, default=None)
    heading: Mapped[str | None] = mapped_column(Text, default=None)
    text: Mapped[str] = mapped_column(Text)


class ChatEvidence(Base):
    __tablename__ = "chat_evidence"
    __table_args__ = (Index(None, "chat_id", "question_id", "epoch"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    chat_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("chats.id", ondelete="CASCADE"))
    question_id: Mapped[int] = mapped_column(ForeignKey("messages.id", ondelete="CASCADE"))
    """The user message that started the question."""
    epoch: Mapped[int] = mapped_column(ForeignKey("messages.id", ondelete="CASCADE"))
    """The assistant message of the round (one model request) whose call this was."""
    kind: Mapped[str] = mapped_column(String(16))
    """`retrieved`, `cited`, or `declared_none` (the model cited nothing, on purpose)."""
    chunk_row_id: Mapped[int | None] = mapped_column(
        ForeignKey("knowledge_chunks.id", ondelete="CASCADE"), default=None, index=True
    )
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)

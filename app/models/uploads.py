"""Uploaded files: one row each, the bytes on disk under the owner's file root."""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import BigInteger, ForeignKey, Index, String, Text, Uuid
from sqlalchemy.orm import Mapped, mapped_column

from app.core.db.base import Base
from app.core.db.types import UTCDateTime


class Upload(Base):
    __tablename__ = "uploads"
    __table_args__ = (Index(None, "user_id", "created_at", "id"),)

    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=uuid.uuid4)
    user_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    chat_id: Mapped[uuid.UUID | None] = mapped_column(
        ForeignKey("chats.id", ondelete="SET NULL"), default=None, index=True
    )
    filename: Mapped[str] = mapped_column(String(255))
    """A safe basename: no separators, control characters or leading dots."""
    stored_path: Mapped[str] = mapped_column(String(1024))
    """Relative to the owner's file root: `uploads/<id>/<filename>`."""
    mime: Mapped[str] = mapped_column(String(255))
    """Sniffed from the bytes, never taken from the client."""
    size: Mapped[int] = mapped_column(BigInteger)
    sha256: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    ingest_status: Mapped[str | None] = mapped_column(String(16), default=None)
    """`pending`, `ready` or `failed` for a searchable document (text, PDF); None otherwise."""
    ingest_error: Mapped[str | None] = mapped_column(Text, default=None)

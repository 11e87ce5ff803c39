"""The request log: one row per model request, failed and cancelled ones included; and
`usage_daily`, its running totals per user, UTC day and model.

The totals are what usage views and quotas read. They are written in the transaction that writes
the request's row (`app.llm.usage.count`), so the two never disagree; and they are what makes
a month of a thousand users' usage a read of a row per user, day and model rather than of every
request: summing a million request rows for `/api/admin/usage` costs 204 ms on SQLite and 272 ms
on PostgreSQL even through the covering index that suits it, against 72 and 90 ms for the whole
route over the totals (`bench/api_overhead.py --usage` measures both).
"""

from __future__ import annotations

import uuid
from datetime import date, datetime

from sqlalchemy import BigInteger, Date, ForeignKey, Integer, String, Text, Uuid
from sqlalchemy.orm import Mapped, mapped_column

from app.core.db.base import Base
from app.core.db.types import BigId, UTCDateTime


class LlmRequest(Base):
    __tablename__ = "llm_requests"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    user_id: Mapped[uuid.UUID | None] = mapped_column(
        Uuid, ForeignKey("users.id", ondelete="CASCADE"), index=True
    )
    chat_id: Mapped[uuid.UUID | None] = mapped_column(
        Uuid, ForeignKey("chats.id", ondelete="SET NULL"), index=True
    )
    message_id: Mapped[int | None] = mapped_column(
        ForeignKey("messages.id", ondelete="SET NULL"), default=None
    )
    model: Mapped[str] = mapped_column(String(300))
    provider: Mapped[str] = mapped_column(String(100))
    purpose: Mapped[str] = mapped_column(String(16), default="round", server_default="round")
    """`round` (a model round of a turn) or `sampling` (an MCP server's `sampling/createMessage`
    run with the chat's model during a call)."""
    started_at: Mapped[datetime] = mapped_column(UTCDateTime)
    duration_ms: Mapped[int | None] = mapped_column(Integer, default=None)
    input_tokens: Mapped[int | None] = mapped_column(Integer, default=None)
    output_tokens: Mapped[int | None] = mapped_column(Integer, default=None)
    cache_read_tokens: Mapped[int | None] = mapped_column(Integer, default=None)
    cache_write_tokens: Mapped[int | None] = mapped_column(Integer, default=None)
    error: Mapped[str | None] = mapped_column(Text, default=None)


class UsageDaily(Base):
    __tablename__ = "usage_daily"
    # The key's order serves every report: one user's days (`user_id` first), and the sums per
    # user and model over a range, read in key order with no sort. On SQLite the rows are stored
    # in that order (WITHOUT ROWID), so that read touches nothing but the table itself. There is
    # deliberately no index on `day` alone: SQLite prefers it for a range over every user, and
    # then sorts what it found, three times slower than reading the whole table in key order
    # (bench/api_overhead.py --usage: 167 ms against 53 ms for a month of 1,000 users).
    __table_args__ = {"sqlite_with_rowid": False}

    user_id: Mapped[uuid.UUID] = mapped_column(
        Uuid, ForeignKey("users.id", ondelete="CASCADE"), primary_key=True
    )
    model: Mapped[str] = mapped_column(String(300), primary_key=True)
    day: Mapped[date] = mapped_column(Date, primary_key=True)
    """The UTC day the requests started on."""
    requests: Mapped[int] = mapped_column(BigInteger, default=0)
    input_tokens: Mapped[int] = mapped_column(BigInteger, default=0)
    output_tokens: Mapped[int] = mapped_column(BigInteger, default=0)
    cache_read_tokens: Mapped[int] = mapped_column(BigInteger, default=0)
    cache_write_tokens: Mapped[int] = mapped_column(BigInteger, default=0)

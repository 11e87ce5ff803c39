"""Column types that behave the same on SQLite and PostgreSQL.

SQLite has no time zones and no 64-bit auto-increment key of its own (only `INTEGER PRIMARY
KEY` aliases the rowid), so the differences are absorbed here once instead of in every model.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import JSON, BigInteger, DateTime, Integer
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator

#: Integer primary keys: BIGINT (identity) on PostgreSQL, the rowid alias on SQLite.
BigId = BigInteger().with_variant(Integer(), "sqlite")

#: JSON documents: JSONB on PostgreSQL, JSON text on SQLite.
JSONDoc = JSON().with_variant(JSONB(), "postgresql")


class UTCDateTime(TypeDecorator[datetime]):
    """A timestamp that is always timezone-aware UTC in Python, whatever the database keeps."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> Any:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetimes are not stored; use an aware UTC datetime")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)

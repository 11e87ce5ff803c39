"""Column types that behave the same on SQLite and PostgreSQL.

SQLite has no time zones and no 64-bit auto-increment key of its own (only `INTEGER PRIMARY
KEY` aliases the rowid), so the differences are absorbed here once instead of in every model.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import orjson
from sqlalchemy import JSON, BigInteger, DateTime, Integer
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator

#: Integer primary keys: BIGINT (identity) on PostgreSQL, the rowid alias on SQLite.
BigId = BigInteger().with_variant(Integer(), "sqlite")

#: JSON documents: JSONB on PostgreSQL, JSON text on SQLite.
JSONDoc = JSON().with_variant(JSONB(), "postgresql")

_DIGITS = bytes(0x30 if 0x30 <= byte <= 0x39 else 0x20 for byte in range(256))
"""Every digit as `0`, every other byte as a space: what `_LONG_NUMBER` is looked for in."""
_LONG_NUMBER = b"0" * 19
"""Digits enough for an integer past 64 bits, which orjson would read as a float."""


def read_json(text: str | bytes) -> Any:
    """A stored JSON document as Python (the engine's `json_deserializer`): orjson, or the
    standard library where orjson would read it differently. Documents are written by `json`
    (SQLAlchemy's serializer), which also writes `NaN`, `Infinity` and integers of any size:
    orjson refuses the first two (so they fall back) and reads the last as a float (so a
    document with a run of 19 digits goes to `json` before orjson sees it). The digits are
    looked for with `bytes.translate` and a substring search, 0.7 us for a stored response of
    750 characters, where a regular expression took 10 us and `json` itself 5; orjson reads it
    in 1.3. That is 6 of the 35 ms a 2,000-message chat took to load (`bench/turn_overhead.py`
    part l). Anything else goes to `json` too, which raises `TypeError` for a number: SQLite
    gives a column declared JSON numeric affinity, so a document that is one number comes back
    as that number, and SQLAlchemy's reader returns it when the deserializer refuses it."""
    raw = text.encode() if isinstance(text, str) else text
    if isinstance(raw, bytes) and _LONG_NUMBER not in raw.translate(_DIGITS):
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            pass
    return json.loads(text)


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

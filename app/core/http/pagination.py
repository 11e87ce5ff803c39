"""Opaque keyset cursors for list routes.

A cursor is the sort key of the last item served (a timestamp and an id), so pages stay free of
duplicates and gaps while rows are added, and each page costs one index range scan however
deep the client has paged. It is opaque to clients (base64url JSON), and a damaged one is a 422:
anything but the exact shape issued (two strings, an aware timestamp with a UTC form, a UUID).
"""

from __future__ import annotations

import uuid
from base64 import urlsafe_b64decode, urlsafe_b64encode
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated

import orjson
from fastapi import Query

from app.core.errors import Invalid

LimitQuery = Annotated[int, Query(ge=1, le=200, description="Page size (at most 200)")]
CursorQuery = Annotated[
    str | None, Query(max_length=200, description="`next_cursor` of the previous page")
]


@dataclass(frozen=True, slots=True)
class Cursor:
    at: datetime
    id: uuid.UUID

    def encode(self) -> str:
        raw = orjson.dumps([self.at.isoformat(), str(self.id)])
        return urlsafe_b64encode(raw).rstrip(b"=").decode()

    @classmethod
    def decode(cls, value: str) -> Cursor:
        try:
            padded = value + "=" * (-len(value) % 4)
            decoded = orjson.loads(urlsafe_b64decode(padded.encode("ascii")))
            if not (
                isinstance(decoded, list)
                and len(decoded) == 2
                and all(isinstance(part, str) for part in decoded)
            ):
                raise ValueError("not a [timestamp, id] pair")
            at, ident = decoded
            parsed = datetime.fromisoformat(at)
            if parsed.tzinfo is None:
                raise ValueError("naive timestamp")
            # In UTC, as stored: a time that has no UTC form (year 1 at +14:00) fails here.
            return cls(parsed.astimezone(UTC), uuid.UUID(ident))
        except (ValueError, TypeError, OverflowError, UnicodeError, orjson.JSONDecodeError) as exc:
            raise Invalid(("query", "cursor"), "cursor is not one this server issued") from exc

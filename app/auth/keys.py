"""API keys: what a script sends as `Authorization: Bearer hth_…` instead of a session cookie.

A key is `hth_` and 43 random URL-safe characters (32 bytes). The database keeps its SHA-256 and
its first twelve characters, the prefix a person recognises it by in a list; the prefix is also
how a request's key is found (an index lookup), and the hash of every row with that prefix is
then compared in constant time, so neither a lookup nor a comparison tells an attacker how much
of a guess was right. `last_used_at` is written at most once a minute per key, as a session's
`last_seen_at` is, so a busy script does not turn every read into a write.

Like the session lookup, the key lookup is one prebuilt statement run on the request's
connection, selecting the owner's columns with it (and the row a route asks for `Alongside`).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import uuid
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, or_, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from app.auth.sessions import (
    TOUCH_INTERVAL,
    USER_COLUMNS,
    Alongside,
    Authenticated,
    split_user,
    with_alongside,
)
from app.models import ApiKey, User

KEY_MARK = "hth_"
KEY_BYTES = 32
PREFIX_LENGTH = len(KEY_MARK) + 8
KEY_LENGTH = len(KEY_MARK) + len(secrets.token_urlsafe(KEY_BYTES))
"""Every key hearth makes is this long (`hth_` + 43): anything else is refused unread."""
_KEY_CHARACTERS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")


def new_key() -> str:
    return KEY_MARK + secrets.token_urlsafe(KEY_BYTES)


def key_hash(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def looks_like_key(value: str) -> bool:
    """Whether `value` has a key's shape; a cookie value or a stray token is turned away here."""
    return (
        len(value) == KEY_LENGTH
        and value.startswith(KEY_MARK)
        and _KEY_CHARACTERS.issuperset(value[len(KEY_MARK) :])
    )


_LOOKUP = (
    select(ApiKey.id, ApiKey.key_hash, ApiKey.last_used_at, *USER_COLUMNS)
    .join(User, User.id == ApiKey.user_id)
    .where(
        ApiKey.prefix == bindparam("prefix"),
        ApiKey.revoked_at.is_(None),
        or_(
            ApiKey.expires_at.is_(None),
            ApiKey.expires_at > bindparam("now", type_=ApiKey.expires_at.type),
        ),
        User.disabled.is_(False),
    )
)


async def resolve_key(
    connection: AsyncConnection,
    key: str,
    now: datetime,
    alongside: Alongside | None = None,
    values: Mapping[str, Any] | None = None,
) -> Authenticated | None:
    """The owner of a live key, or None (unknown, revoked, expired, or its owner disabled); with
    the row `alongside` asks for, `values` bound in its condition."""
    if not looks_like_key(key):
        return None
    digest = key_hash(key)
    statement = _LOOKUP if alongside is None else with_alongside(_LOOKUP, alongside)
    parameters = {"prefix": key[:PREFIX_LENGTH], "now": now, **(values or {})}
    rows = (await connection.execute(statement, parameters)).all()
    found = None
    for row in rows:  # every row is compared, so the time taken says nothing of which matched
        if hmac.compare_digest(row[1], digest):
            found = row
    if found is None:
        return None
    key_id, _, last_used, *fields = found
    if last_used is None or now - last_used >= TOUCH_INTERVAL:
        await connection.execute(update(ApiKey).where(ApiKey.id == key_id).values(last_used_at=now))
        await connection.commit()
    user, beside = split_user(fields)
    return Authenticated(user=user, session_id=None, token=key, key_id=key_id, alongside=beside)


def key_row(
    user_id: uuid.UUID, name: str, now: datetime, expires_at: datetime | None
) -> tuple[ApiKey, str]:
    """A new key row for `user_id` and the key itself, which is shown once and never stored."""
    key = new_key()
    row = ApiKey(
        user_id=user_id,
        name=name,
        prefix=key[:PREFIX_LENGTH],
        key_hash=key_hash(key),
        created_at=now,
        expires_at=expires_at,
    )
    return row, key

"""Accounts and what authenticates them: users, their sessions, API keys, and failed-login records.

A session row keeps only the SHA-256 of the random token in the cookie, and a key row only the
SHA-256 of the key (beside the few characters a person recognises it by), so a copy of the
database signs nobody in. Sign-in and sign-up attempts are rows rather than process memory so
the throttle holds across every worker sharing the database.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import Boolean, ForeignKey, Index, String, Uuid, false
from sqlalchemy.orm import Mapped, mapped_column

from app.core.db.base import Base
from app.core.db.types import BigId, JSONDoc, UTCDateTime

USER_AGENT_LENGTH = 300


class User(Base):
    __tablename__ = "users"

    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=uuid.uuid4)
    email: Mapped[str] = mapped_column(String(320), unique=True)
    """Always stored lower-cased."""
    password_hash: Mapped[str] = mapped_column(String(255))
    display_name: Mapped[str] = mapped_column(String(200))
    is_admin: Mapped[bool] = mapped_column(Boolean, default=False)
    disabled: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    """A disabled user signs in nowhere: sessions and keys are refused at the next request."""
    quota: Mapped[dict[str, Any] | None] = mapped_column(JSONDoc, default=None)
    """The user's own `{daily_tokens, monthly_cost_usd}` (each null: unlimited); null: the
    defaults from settings apply."""
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)


class AuthSession(Base):
    __tablename__ = "auth_sessions"

    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=uuid.uuid4)
    user_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("users.id", ondelete="CASCADE"), index=True
    )
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    """Hex SHA-256 of the opaque token; the token itself exists only in the cookie."""
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    last_seen_at: Mapped[datetime] = mapped_column(UTCDateTime)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime)
    """The absolute end of the session, however active it stays."""
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime, default=None)
    user_agent: Mapped[str | None] = mapped_column(String(USER_AGENT_LENGTH), default=None)
    """The browser's `User-Agent` at sign-in (its first characters), for the sessions list."""


class ApiKey(Base):
    __tablename__ = "api_keys"

    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=uuid.uuid4)
    user_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("users.id", ondelete="CASCADE"), index=True
    )
    name: Mapped[str] = mapped_column(String(100))
    prefix: Mapped[str] = mapped_column(String(16), index=True)
    """The key's first characters (`hth_` and eight more): shown in lists, and how it is found."""
    key_hash: Mapped[str] = mapped_column(String(64))
    """Hex SHA-256 of the whole key, compared in constant time."""
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime, default=None)
    last_used_at: Mapped[datetime | None] = mapped_column(UTCDateTime, default=None)
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime, default=None)


class LoginFailure(Base):
    __tablename__ = "login_failures"
    __table_args__ = (Index(None, "key", "created_at"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    key: Mapped[str] = mapped_column(String(400))
    """What was attempted: `login:<email>|<address>`, `ip:<address>`, `email:<email>` or
    `signup:<address>` (app.auth.throttle); the table keeps attempts, not only failures."""
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)

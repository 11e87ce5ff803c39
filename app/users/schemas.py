"""Users and the auth bodies."""

from __future__ import annotations

import re
import uuid
from datetime import date, datetime
from typing import Any

from pydantic import BaseModel, Field, StrictBool, field_validator, model_validator

from app.auth.passwords import password_problem
from app.core.http.schemas import RequestBody

# Deliberately plain: one `@`, no spaces, a dot in the domain. Deliverability is not ours to judge.
_EMAIL = re.compile(r"^[^@\s\x00-\x1f]+@[^@\s\x00-\x1f]+\.[^@\s\x00-\x1f.]+$")


def _allowed_password(value: str) -> str:
    problem = password_problem(value)
    if problem is not None:
        raise ValueError(problem)
    return value


def _normal_email(value: str) -> str:
    value = value.strip().lower()
    if len(value) > 320 or not _EMAIL.match(value):
        raise ValueError("not a valid email address")
    return value


class UserOut(BaseModel):
    id: uuid.UUID
    email: str
    display_name: str
    is_admin: bool
    created_at: datetime


class SignedInOut(UserOut):
    """A user, with the CSRF token a frontend on another origin can't read from the cookie."""

    csrf_token: str


class RegisterIn(RequestBody):
    email: str = Field(max_length=320, examples=["ada@example.com"])
    password: str = Field(min_length=8, max_length=1024)
    display_name: str | None = Field(default=None, max_length=200)

    _email = field_validator("email")(_normal_email)
    _password = field_validator("password")(_allowed_password)

    @field_validator("display_name")
    @classmethod
    def _strip_name(cls, value: str | None) -> str | None:
        if value is None:
            return None
        value = value.strip()
        if any(ord(ch) < 32 for ch in value):
            raise ValueError("control characters are not allowed")
        return value or None


class LoginIn(RequestBody):
    email: str = Field(max_length=320)
    password: str = Field(max_length=1024)

    @field_validator("email")
    @classmethod
    def _lower(cls, value: str) -> str:
        return value.strip().lower()


def _plain_name(value: str) -> str:
    value = value.strip()
    if not value:
        raise ValueError("a name is needed")
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in value):
        raise ValueError("control characters are not allowed")
    return value


class PasswordChangeIn(RequestBody):
    current_password: str = Field(max_length=1024)
    new_password: str = Field(min_length=8, max_length=1024)

    _password = field_validator("new_password")(_allowed_password)


class SessionOut(BaseModel):
    id: uuid.UUID
    created_at: datetime
    last_seen_at: datetime
    user_agent: str | None
    current: bool


class KeyIn(RequestBody):
    name: str = Field(min_length=1, max_length=100, examples=["nightly report"])
    expires_in_days: int | None = Field(default=None, ge=1, le=3650)

    _name = field_validator("name")(_plain_name)


class KeyOut(BaseModel):
    id: uuid.UUID
    name: str
    prefix: str
    created_at: datetime
    expires_at: datetime | None
    last_used_at: datetime | None


class KeyCreatedOut(KeyOut):
    key: str
    """The key itself, shown in this answer only."""


MAX_DAILY_TOKENS = 10**12
MAX_MONTHLY_USD = 1_000_000.0


class Quota(RequestBody):
    """A user's limits; each null is unlimited. Tokens are input + output + cache read and write,
    a day and a month are UTC's."""

    daily_tokens: int | None = Field(default=None, ge=0, le=MAX_DAILY_TOKENS)
    monthly_cost_usd: float | None = Field(
        default=None, ge=0, le=MAX_MONTHLY_USD, allow_inf_nan=False
    )


class AdminUserOut(UserOut):
    disabled: bool
    last_seen_at: datetime | None
    quota: Quota | None
    """The user's own quota; null: the defaults from settings apply."""


class AdminUserPage(BaseModel):
    items: list[AdminUserOut]
    next_cursor: str | None


class AdminUserPatch(RequestBody):
    """What changes: only the fields sent. `quota: null` gives the user the defaults again."""

    is_admin: StrictBool | None = None
    disabled: StrictBool | None = None
    quota: Quota | None = None

    @model_validator(mode="after")
    def _flags_are_true_or_false(self) -> AdminUserPatch:
        for name in ("is_admin", "disabled"):
            if name in self.model_fields_set and getattr(self, name) is None:
                raise ValueError(f"{name} is true or false")
        return self

    def changes(self) -> dict[str, Any]:
        """The columns to write."""
        changes: dict[str, Any] = {
            name: getattr(self, name)
            for name in ("is_admin", "disabled")
            if name in self.model_fields_set
        }
        if "quota" in self.model_fields_set:
            changes["quota"] = self.quota.model_dump() if self.quota is not None else None
        return changes


class UsageFigures(BaseModel):
    requests: int
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    cost_usd: float | None
    """USD, from the models' `pricing`; null when none of the requests had a priced model."""


class UsageItem(UsageFigures):
    day: date | None = None
    model: str | None = None
    user_id: uuid.UUID | None = None
    email: str | None = None


class UsageOut(BaseModel):
    items: list[UsageItem]
    total: UsageFigures

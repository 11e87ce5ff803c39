"""Users and the auth bodies."""

from __future__ import annotations

import re
import uuid
from datetime import datetime

from pydantic import BaseModel, Field, field_validator

from app.auth.passwords import password_problem
from app.core.http.schemas import RequestBody

# Deliberately plain: one `@`, no spaces, a dot in the domain. Deliverability is not ours to judge.
_EMAIL = re.compile(r"^[^@\s\x00-\x1f]+@[^@\s\x00-\x1f]+\.[^@\s\x00-\x1f.]+$")


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

    @field_validator("password")
    @classmethod
    def _allowed_password(cls, value: str) -> str:
        problem = password_problem(value)
        if problem is not None:
            raise ValueError(problem)
        return value

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

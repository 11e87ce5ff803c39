"""Settings, read once from `HEARTH_*` environment variables (and `.env`).

Every default is an embedded one, so a bare `hearth serve` runs with no configuration at all:
SQLite and files under `./var`, a secret key generated on first start and kept beside the data.
The table in docs/http-api.md is the contract; each field here is one row of it.
"""

from __future__ import annotations

import ipaddress
import os
import secrets
from functools import cached_property
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict


class Settings(BaseSettings):
    """hearth's configuration; see the settings table in docs/http-api.md."""

    model_config = SettingsConfigDict(
        env_prefix="HEARTH_", env_file=".env", extra="ignore", frozen=True
    )

    database_url: str = "sqlite+aiosqlite:///./var/hearth.db"
    data_dir: Path = Path("./var/data")
    secret_key: SecretStr | None = None
    providers_file: Path = Path("config/providers.yaml")
    mcp_file: Path = Path("config/mcp.yaml")
    allow_registration: bool = True
    cookie_secure: bool = False
    cookie_samesite: Literal["lax", "strict", "none"] = "lax"
    allowed_origins: Annotated[list[str], NoDecode] = Field(default_factory=list)
    max_upload_bytes: int = Field(default=268_435_456, gt=0)
    auto_migrate: bool = True
    session_idle_days: float = Field(default=7, gt=0)
    session_max_days: float = Field(default=30, gt=0)
    login_max_failures: int = Field(default=5, ge=1)
    """Failed sign-ins per (email, client address) per 15 minutes before 429."""
    login_max_failures_per_address: int = Field(default=50, ge=1)
    """Failed sign-ins from one client address, any email, per 15 minutes before 429."""
    registrations_per_hour: int = Field(default=20, ge=1)
    """Sign-ups per client address per hour before 429."""
    trusted_proxies: Annotated[list[str], NoDecode] = Field(default_factory=list)
    """Addresses whose `X-Forwarded-For` / `Forwarded` headers name the client; nobody else's."""
    user_storage_bytes: int = Field(default=10 * 1024**3, gt=0)
    """All of one user's files together; an upload or a write past it is 413 and keeps nothing."""
    max_rounds: int = Field(default=25, ge=1)
    turn_lease_seconds: int = Field(default=30, ge=1)
    compact_threshold: float = Field(default=0.6, gt=0, le=1)
    compact_keep: int = Field(default=10, ge=1)
    compact_tool_returns: bool = True
    """Earlier questions' large tool returns go out as receipts (request-time compaction)."""
    search_budget: int = Field(default=5, ge=0)
    summary_model: str = ""
    default_quota_daily_tokens: int | None = Field(default=None, ge=0, le=10**12)
    """Tokens a day for users without their own quota; empty: unlimited."""
    default_quota_monthly_usd: float | None = Field(
        default=None, ge=0, le=1_000_000, allow_inf_nan=False
    )
    """Cost a month for users without their own quota; empty: unlimited."""
    metrics_token: SecretStr | None = None
    """The bearer token `GET /metrics` asks for; unset: no metrics are kept and it is a 404."""
    log_format: Literal["json", "text"] | None = None
    """One JSON object a line, or plain text; unset: JSON under `hearth serve` when stderr is
    not a terminal, text otherwise."""
    trace_content: bool = False
    """With tracing on, model request spans carry the messages and tool arguments too."""

    @field_validator("metrics_token", mode="before")
    @classmethod
    def _empty_is_unset(cls, value: object) -> object:
        return None if isinstance(value, str) and not value.strip() else value

    @field_validator("default_quota_daily_tokens", "default_quota_monthly_usd", mode="before")
    @classmethod
    def _empty_is_unlimited(cls, value: object) -> object:
        return None if isinstance(value, str) and not value.strip() else value

    @field_validator("allowed_origins", mode="before")
    @classmethod
    def _split_origins(cls, value: object) -> object:
        if isinstance(value, str):
            return [part.strip().rstrip("/") for part in value.split(",") if part.strip()]
        return value

    @field_validator("trusted_proxies", mode="before")
    @classmethod
    def _split_proxies(cls, value: object) -> object:
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    @field_validator("trusted_proxies")
    @classmethod
    def _proxies_are_addresses(cls, value: list[str]) -> list[str]:
        for proxy in value:
            try:
                ipaddress.ip_network(proxy.strip(), strict=False)
            except ValueError:
                raise ValueError(f"{proxy!r} is not an IP address or network") from None
        return value

    @field_validator("cookie_samesite", mode="before")
    @classmethod
    def _lower_samesite(cls, value: object) -> object:
        return value.lower() if isinstance(value, str) else value

    @model_validator(mode="after")
    def _samesite_none_needs_secure(self) -> Settings:
        if self.cookie_samesite == "none" and not self.cookie_secure:
            raise ValueError("HEARTH_COOKIE_SAMESITE=none needs HEARTH_COOKIE_SECURE=true")
        return self

    @model_validator(mode="after")
    def _origins_are_named(self) -> Settings:
        # Credentials go with every allowed origin, so a wildcard would let any site act as
        # the signed-in user: each origin must be named.
        if any("*" in origin for origin in self.allowed_origins):
            raise ValueError(
                "HEARTH_ALLOWED_ORIGINS cannot hold '*': cross-origin requests carry the "
                "user's cookies, so name each origin (https://app.example.com,...)"
            )
        return self

    @cached_property
    def signing_key(self) -> str:
        """The key that signs cookies: the configured one, or one generated once on disk."""
        if self.secret_key is not None:
            return self.secret_key.get_secret_value()
        return load_or_create_secret(self.data_dir / "secret_key")


def load_or_create_secret(path: Path) -> str:
    """Read the secret at `path`, creating it (mode 0600) exactly once if it is missing.

    The key is written to a file of this call's own and then hard-linked to `path`: the link
    either appears with the whole key in it or fails because another creator's is there, so
    several workers starting together agree on one key and none ever reads a half-made file.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists():
        return _read_secret(path)
    draft = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(8)}")
    fd = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    key = secrets.token_urlsafe(48)
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(key + "\n")
        os.link(draft, path)
    except FileExistsError:
        return _read_secret(path)
    finally:
        draft.unlink(missing_ok=True)
    return key


def _read_secret(path: Path) -> str:
    key = path.read_text().strip()
    if not key:
        raise RuntimeError(f"{path} is empty; remove it or set HEARTH_SECRET_KEY")
    return key

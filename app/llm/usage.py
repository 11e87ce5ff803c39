"""Usage: the running totals the request log feeds, and what they cost.

`count` adds request rows to `usage_daily` in the transaction that inserts them (it is the
`then` of `insert_once`), with one upsert per row: `INSERT … ON CONFLICT DO UPDATE` adding to the
totals, which both engines have, so concurrent requests of one user in several workers add up
without a lost update.

Cost is linear in the token counts, so it is computed from summed tokens, per model: the grouped
queries sum per (group, model) in SQL and `cost_usd` prices those few sums. `input_tokens` is the
whole prompt, cached tokens included (as pydantic-ai reports every provider's usage); the
uncached part is priced at the input price, cache reads and writes at theirs.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from typing import Any

from sqlalchemy import BigInteger, Date, bindparam, cast, exists, func, insert, literal, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession, async_sessionmaker

from app.core.db.base import Base
from app.core.db.engine import dialect_of
from app.core.db.retry import insert_once, transaction
from app.llm.config import Pricing
from app.models import LlmRequest, UsageDaily

TOKEN_COLUMNS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")


@functools.cache
def _add_to_day(dialect: str) -> Any:
    """The upsert that adds one request to its user's day, built once per database kind: its
    values are bound when it runs (`app.chats.repository` says why)."""
    make_insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    statement = make_insert(UsageDaily)
    table = UsageDaily.__table__.c
    return statement.on_conflict_do_update(
        index_elements=["user_id", "model", "day"],
        set_={
            "requests": table.requests + 1,
            **{name: table[name] + statement.excluded[name] for name in TOKEN_COLUMNS},
        },
    )


async def count(db: AsyncSession, rows: Sequence[Base]) -> None:
    """Add the request rows among `rows` to their user's totals for the UTC day they started
    on (other rows inserted with them are left alone)."""
    statement = _add_to_day(db.get_bind().dialect.name)
    for row in rows:
        if not isinstance(row, LlmRequest) or row.user_id is None:
            continue
        values = {name: getattr(row, name) or 0 for name in TOKEN_COLUMNS}
        await db.execute(
            statement,
            {
                "user_id": row.user_id,
                "day": row.started_at.date(),
                "model": row.model,
                "requests": 1,
                **values,
            },
        )


REQUEST_COLUMNS = (
    "user_id",
    "chat_id",
    "message_id",
    "model",
    "provider",
    "started_at",
    "duration_ms",
    "error",
    *TOKEN_COLUMNS,
)
"""What a turn's request log writes of a request (`log_request`)."""


@functools.cache
def _log_and_count() -> Any:
    """PostgreSQL: a request's row and its addition to the user's day (`count`), in one
    statement (the row a data-modifying CTE, the upsert reading it), which inserts nothing when
    the chat already has a request that started at the same instant: tried again after its
    connection dropped, it lands once. Run alone, it is one round trip where a transaction
    takes four. Built once; its values are `req_` and the column's name."""
    requests, days = (Base.metadata.tables[name] for name in ("llm_requests", "usage_daily"))
    request = requests.c
    value = {name: bindparam(f"req_{name}", type_=request[name].type) for name in REQUEST_COLUMNS}
    landed = exists().where(
        request.chat_id == value["chat_id"], request.started_at == value["started_at"]
    )
    logged = (
        insert(requests)
        .from_select(list(value), select(*value.values()).where(~landed))
        .returning(request.user_id, request.model, request.started_at)
        .returning(*(request[name] for name in TOKEN_COLUMNS))
        .cte("logged")
    )
    day = cast(func.timezone("UTC", logged.c.started_at), Date)
    added = select(
        logged.c.user_id,
        logged.c.model,
        day,
        literal(1, BigInteger),
        *(func.coalesce(logged.c[name], 0) for name in TOKEN_COLUMNS),
    ).where(logged.c.user_id.is_not(None))
    statement = postgresql.insert(days).from_select(
        ["user_id", "model", "day", "requests", *TOKEN_COLUMNS], added
    )
    return statement.on_conflict_do_update(
        index_elements=["user_id", "model", "day"],
        set_={
            "requests": days.c.requests + 1,
            **{name: days.c[name] + statement.excluded[name] for name in TOKEN_COLUMNS},
        },
    )


async def log_request(sessions: async_sessionmaker[AsyncSession], values: dict[str, Any]) -> None:
    """Store a turn's model request (`values`: `REQUEST_COLUMNS`, tokens left out when the
    request got no response) and add it to the user's day, exactly once however often it is
    tried. On PostgreSQL one statement (`_log_and_count`), which `sessions` should run alone
    (`alone_factory`); elsewhere `insert_once`, then `count`, in one transaction."""
    if dialect_of(sessions) != "postgresql":
        await insert_once(
            sessions, lambda: [LlmRequest(**values)], what="logging a model request", then=count
        )
        return
    bound = {f"req_{name}": values.get(name) for name in REQUEST_COLUMNS}

    async def write(db: AsyncSession) -> None:
        await db.execute(_log_and_count(), bound)

    await transaction(sessions, write, what="logging a model request")


@dataclass(frozen=True, slots=True)
class Tokens:
    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    @property
    def total(self) -> int:
        """What a token quota counts: input + output + cache read + cache write."""
        cached = self.cache_read_tokens + self.cache_write_tokens
        return self.input_tokens + self.output_tokens + cached

    def __add__(self, other: Tokens) -> Tokens:
        return Tokens(
            self.requests + other.requests,
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cache_read_tokens + other.cache_read_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
        )


def cost_usd(pricing: Pricing | None, tokens: Tokens) -> float | None:
    """What `tokens` of one model cost, or None for a model without pricing."""
    if pricing is None:
        return None
    cached = tokens.cache_read_tokens + tokens.cache_write_tokens
    uncached = max(tokens.input_tokens - cached, 0)
    read = pricing.input if pricing.cache_read is None else pricing.cache_read
    write = pricing.input if pricing.cache_write is None else pricing.cache_write
    return (
        uncached * pricing.input
        + tokens.output_tokens * pricing.output
        + tokens.cache_read_tokens * read
        + tokens.cache_write_tokens * write
    ) / 1_000_000


SUMS = (
    func.sum(UsageDaily.requests),
    *(func.sum(getattr(UsageDaily, name)) for name in TOKEN_COLUMNS),
)


def tokens_of(values: Sequence[int | None]) -> Tokens:
    return Tokens(*(int(value or 0) for value in values))


async def month_so_far(
    db: AsyncSession | AsyncConnection, user_id: uuid.UUID, today: date
) -> tuple[dict[str, Tokens], Tokens]:
    """The user's totals this month per model, and today's over all models (one indexed read
    of at most a row per day and model)."""
    rows = await db.execute(
        select(UsageDaily.day, UsageDaily.model, UsageDaily.requests)
        .add_columns(*(getattr(UsageDaily, name) for name in TOKEN_COLUMNS))
        .where(UsageDaily.user_id == user_id, UsageDaily.day.between(today.replace(day=1), today))
    )
    month: dict[str, Tokens] = {}
    on_today = Tokens()
    for day, model, *values in rows:
        tokens = tokens_of(values)
        month[model] = month.get(model, Tokens()) + tokens
        if day == today:
            on_today += tokens
    return month, on_today

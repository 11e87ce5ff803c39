"""Quotas: how many tokens a day and how many dollars a month a user may spend.

A quota is checked at two moments. Before a turn starts (a send, a regenerate, the approval
that resumes a turn, `/compact`), a user over it is answered 429 with `Retry-After`, the seconds
until the quota resets (midnight UTC for the daily tokens, the first of the month for the cost).
Inside a turn, before each model request after its first (`QuotaGuard`): a turn that went over
finishes the round it was in and starts no other, ending with an error that names the quota.

What counts is the usage totals (`usage_daily`, written with each request's log row), so every
model request of the user counts, whatever made it: rounds, an MCP server's sampling requests,
summaries. A request in flight counts once it has answered, so turns running at once can each
end at most one round past the quota; none starts a round once it is reached.

The limits are the user's own quota when they have one (each field null = unlimited), otherwise
the defaults from settings; with no limit at all nothing is read.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any

from pydantic_ai import RunContext
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import ModelResponse
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.clock import Clock
from app.core.errors import TooManyRequests
from app.llm.registry import ModelRegistry
from app.llm.usage import cost_usd, month_so_far
from app.observability.metrics import NO_METRICS, Reporter
from app.settings import Settings
from app.tools.deps import TurnDeps


@dataclass(frozen=True, slots=True)
class Limits:
    daily_tokens: int | None = None
    monthly_cost_usd: float | None = None

    @property
    def unlimited(self) -> bool:
        return self.daily_tokens is None and self.monthly_cost_usd is None


def limits_for(settings: Settings, own: Mapping[str, Any] | None) -> Limits:
    """The user's own quota, or the defaults from settings for a user without one."""
    if own is not None:
        return Limits(own.get("daily_tokens"), own.get("monthly_cost_usd"))
    return Limits(settings.default_quota_daily_tokens, settings.default_quota_monthly_usd)


@dataclass(frozen=True, slots=True)
class Exceeded:
    detail: str
    retry_after: int
    """Seconds until the quota resets."""
    quota: str = "daily_tokens"
    """Which: `daily_tokens` or `monthly_cost` (the metrics' label)."""


def _next_month(day: date) -> datetime:
    year, month = (day.year + 1, 1) if day.month == 12 else (day.year, day.month + 1)
    return datetime(year, month, 1, tzinfo=UTC)


async def exceeded(
    db: AsyncSession,
    registry: ModelRegistry,
    user_id: uuid.UUID,
    limits: Limits,
    now: datetime,
) -> Exceeded | None:
    """Which quota the user has used up, if any (the daily tokens first)."""
    if limits.unlimited:
        return None
    today = now.astimezone(UTC).date()
    month, on_today = await month_so_far(db, user_id, today)
    if limits.daily_tokens is not None:
        tokens = on_today.total
        if tokens >= limits.daily_tokens:
            reset = datetime.combine(today + timedelta(days=1), datetime.min.time(), UTC)
            return Exceeded(
                f"the daily quota of {limits.daily_tokens:,} tokens is used up "
                f"({tokens:,} today); it resets at 00:00 UTC",
                math.ceil((reset - now).total_seconds()),
            )
    if limits.monthly_cost_usd is not None:
        costs = [
            cost_usd(info.config.pricing if (info := registry.get(model)) else None, tokens)
            for model, tokens in month.items()
        ]
        spent = sum(cost for cost in costs if cost is not None)
        if spent >= limits.monthly_cost_usd:
            return Exceeded(
                f"the monthly quota of ${limits.monthly_cost_usd:,.2f} is used up "
                f"(${spent:,.2f} this month); it resets on the 1st at 00:00 UTC",
                math.ceil((_next_month(today) - now).total_seconds()),
                "monthly_cost",
            )
    return None


async def refuse_if_exceeded(
    db: AsyncSession,
    registry: ModelRegistry,
    user_id: uuid.UUID,
    limits: Limits,
    now: datetime,
    metrics: Reporter = NO_METRICS,
) -> None:
    """429 with `Retry-After` for a user over quota: nothing is started."""
    found = await exceeded(db, registry, user_id, limits, now)
    if found is not None:
        metrics.quota_refused(found.quota)
        raise TooManyRequests(found.detail[0].upper() + found.detail[1:], found.retry_after)


class QuotaReached(Exception):
    """A turn went over its user's quota; it starts no other round."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


class QuotaGuard(AbstractCapability[TurnDeps]):
    """Before each model request of a turn after its first: stop if the user is over quota.

    It runs outside the other capabilities (outermost in `TurnHooks`), so a request it refuses
    opens no round and writes nothing."""

    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        registry: ModelRegistry,
        clock: Clock,
        user_id: uuid.UUID,
        limits: Limits,
        metrics: Reporter = NO_METRICS,
    ) -> None:
        self.sessions = sessions
        self.registry = registry
        self.clock = clock
        self.user_id = user_id
        self.limits = limits
        self.metrics = metrics

    async def wrap_model_request(
        self, ctx: RunContext[TurnDeps], *, request_context: Any, handler: Any
    ) -> ModelResponse:
        if ctx.usage.requests > 0:
            async with self.sessions() as db:
                found = await exceeded(
                    db, self.registry, self.user_id, self.limits, self.clock.now()
                )
            if found is not None:
                self.metrics.quota_refused(found.quota)
                raise QuotaReached(f"This turn was ended: {found.detail}.")
        response: ModelResponse = await handler(request_context)
        return response

"""Usage reports: requests, tokens and cost over a range of UTC days, grouped by day, model or
user, for one user (`/api/usage`) or across users (`/api/admin/usage`).

One grouped query over the usage totals sums per (group, model) in the database; the few rows
it answers are priced per model and folded into their groups here. A group's `cost_usd` is the
cost of its priced models, null when none of its requests went to a model with pricing (a group
mixing both counts the priced part; `/api/usage?group_by=model` shows which is which).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import date
from typing import Any, Literal

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncConnection

from app.llm.registry import ModelRegistry
from app.llm.usage import SUMS, Tokens, cost_usd, tokens_of
from app.models import UsageDaily, User

GroupBy = Literal["day", "model", "user"]
EMAILS_PER_QUERY = 5_000


@dataclass(slots=True)
class _Group:
    tokens: Tokens
    cost: float | None

    def add(self, tokens: Tokens, cost: float | None) -> None:
        self.tokens = self.tokens + tokens
        if cost is not None:
            self.cost = (self.cost or 0.0) + cost


def _figures(group: _Group) -> dict[str, Any]:
    tokens = group.tokens
    return {
        "requests": tokens.requests,
        "input_tokens": tokens.input_tokens,
        "output_tokens": tokens.output_tokens,
        "cache_read_tokens": tokens.cache_read_tokens,
        "cache_write_tokens": tokens.cache_write_tokens,
        "cost_usd": round(group.cost, 6) if group.cost is not None else None,
    }


async def report(
    connection: AsyncConnection,
    registry: ModelRegistry,
    *,
    first: date,
    last: date,
    group_by: GroupBy,
    user_id: uuid.UUID | None,
) -> dict[str, Any]:
    """`{items, total}` for the days `first` to `last` (both included), of `user_id` or all."""
    keys: tuple[Any, ...] = {
        "day": (UsageDaily.day,),
        "model": (),
        "user": (UsageDaily.user_id,),
    }[group_by]
    query = select(*keys, UsageDaily.model, *SUMS).where(UsageDaily.day.between(first, last))
    if user_id is not None:
        query = query.where(UsageDaily.user_id == user_id)
    query = query.group_by(*keys, UsageDaily.model)

    groups: dict[tuple[Any, ...], _Group] = {}
    total = _Group(Tokens(), None)
    prices: dict[str, Any] = {}
    for row in await connection.execute(query):
        *key, model = row[: len(keys) + 1]
        tokens = tokens_of(row[len(keys) + 1 :])
        if model not in prices:
            info = registry.get(model)
            prices[model] = info.config.pricing if info is not None else None
        cost = cost_usd(prices[model], tokens)
        group_key = (model,) if group_by == "model" else tuple(key)
        groups.setdefault(group_key, _Group(Tokens(), None)).add(tokens, cost)
        total.add(tokens, cost)
    if group_by == "user" and groups:  # the emails, once per user rather than per summed row
        ids = [key[0] for key in groups]
        emails: dict[Any, str] = {}
        for start in range(0, len(ids), EMAILS_PER_QUERY):  # within SQLite's bound parameters
            chunk = ids[start : start + EMAILS_PER_QUERY]
            found = await connection.execute(select(User.id, User.email).where(User.id.in_(chunk)))
            emails.update((row.id, row.email) for row in found)
        groups = {(key[0], emails.get(key[0], "")): group for key, group in groups.items()}

    items = [(key, group) for key, group in groups.items()]
    if group_by == "user":
        items.sort(key=lambda item: (-(item[1].cost or 0.0), -item[1].tokens.total, item[0][1]))
    else:
        items.sort(key=lambda item: item[0])
    return {
        "items": [{**_labels(group_by, key), **_figures(group)} for key, group in items],
        "total": _figures(total),
    }


def _labels(group_by: GroupBy, key: tuple[Any, ...]) -> dict[str, Any]:
    if group_by == "day":
        return {"day": key[0].isoformat()}
    if group_by == "model":
        return {"model": key[0]}
    return {"user_id": str(key[0]), "email": key[1]}

"""Usage and cost: `/api/usage` for the signed-in user (a key may read it too) and
`/api/admin/usage` across users, for admins. The ranges are UTC days, `to` included, at most
366 days; the figures come from `app.users.usage`. A day is written `YYYY-MM-DD` and nothing
else: pydantic alone would also read a number as a Unix time (`?to=-7e-261` as 1970-01-01),
which the schema's `format: date` does not allow."""

from __future__ import annotations

import re
import uuid
from datetime import date, timedelta
from typing import Annotated, Literal

from fastapi import APIRouter, Query, Response
from pydantic import BeforeValidator

from app.api.admin import AdminAuth
from app.api.deps import Auth, Connection, ServicesDep
from app.core.errors import Invalid
from app.core.http.json import json_response
from app.core.http.schemas import error_responses
from app.users import usage
from app.users.schemas import UsageOut

router = APIRouter(tags=["usage"])

MAX_DAYS = 366
DEFAULT_DAYS = 30

ISO_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")


def _iso_day(value: object) -> object:
    if isinstance(value, str) and not ISO_DAY.fullmatch(value):
        raise ValueError("a day is written YYYY-MM-DD")
    return value


Day = Annotated[date, BeforeValidator(_iso_day)]
FromQuery = Annotated[
    Day | None, Query(alias="from", description="First UTC day (YYYY-MM-DD); default 29 days ago")
]
ToQuery = Annotated[
    Day | None, Query(alias="to", description="Last UTC day, included; default today")
]


def _range(today: date, first: date | None, last: date | None) -> tuple[date, date]:
    last = last or today
    if first is None:  # the default range, cut at the calendar's first day
        first = last - min(timedelta(days=DEFAULT_DAYS - 1), last - date.min)
    if first > last:
        raise Invalid(("query", "from"), "from is after to")
    if (last - first).days + 1 > MAX_DAYS:
        raise Invalid(("query", "to"), f"a range covers at most {MAX_DAYS} days")
    return first, last


@router.get("/api/usage", response_model=UsageOut, responses=error_responses(401))
async def my_usage(
    auth: Auth,
    services: ServicesDep,
    connection: Connection,
    first: FromQuery = None,
    last: ToQuery = None,
    group_by: Literal["day", "model"] = "day",
) -> Response:
    """The signed-in user's requests, tokens and cost per day or per model."""
    first, last = _range(services.clock.now().date(), first, last)
    return json_response(
        await usage.report(
            connection,
            services.registry,
            first=first,
            last=last,
            group_by=group_by,
            user_id=auth.user.id,
        )
    )


@router.get("/api/admin/usage", response_model=UsageOut, responses=error_responses(401, 403))
async def all_usage(
    auth: AdminAuth,
    services: ServicesDep,
    connection: Connection,
    first: FromQuery = None,
    last: ToQuery = None,
    group_by: Literal["user", "day", "model"] = "user",
    user_id: uuid.UUID | None = None,
) -> Response:
    """Every user's usage (or one user's), per user, day or model."""
    first, last = _range(services.clock.now().date(), first, last)
    return json_response(
        await usage.report(
            connection,
            services.registry,
            first=first,
            last=last,
            group_by=group_by,
            user_id=user_id,
        )
    )

"""`GET /metrics`: every worker's metrics summed, for a Prometheus that holds the token.

OpenMetrics when the scraper's `Accept` asks for it, the Prometheus text format otherwise.
A 404 while `HEARTH_METRICS_TOKEN` is unset (nothing is kept then), a 401 for any other
`Authorization`, compared in constant time. Reading the workers' files is blocking work, so it
runs in a thread; the ingestion queue is counted in the database as the scrape comes.
"""

from __future__ import annotations

import asyncio
import hmac

from fastapi import APIRouter, Request, Response
from sqlalchemy import func, select

from app.api.deps import ServicesDep
from app.core.errors import NotFound, Unauthorized
from app.models import Upload
from app.observability.metrics import Metrics

router = APIRouter(tags=["health"])


@router.get("/metrics", include_in_schema=False)
async def metrics(request: Request, services: ServicesDep) -> Response:
    token = services.settings.metrics_token
    reporter = services.metrics
    if token is None or not isinstance(reporter, Metrics):
        raise NotFound("not found")
    expected = f"Bearer {token.get_secret_value()}".encode()
    given = request.headers.get("authorization", "").encode("latin-1", "replace")
    if not hmac.compare_digest(given, expected):
        raise Unauthorized("the metrics token is needed", headers={"WWW-Authenticate": "Bearer"})
    async with services.sessions() as db:
        pending = await db.scalar(
            select(func.count()).select_from(Upload).where(Upload.ingest_status == "pending")
        )
    reporter.ingestion_queue(pending or 0)
    body, media_type = await asyncio.to_thread(
        reporter.exposition, request.headers.get("accept", "")
    )
    return Response(body, media_type=media_type)

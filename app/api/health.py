"""Liveness and readiness probes."""

from __future__ import annotations

from fastapi import APIRouter
from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError

from app.api.deps import ServicesDep
from app.core.http.json import json_response
from app.core.http.schemas import HealthOut, error_responses

router = APIRouter(tags=["health"])


@router.get("/healthz", response_model=HealthOut)
async def healthz() -> dict[str, str]:
    """200 while the process runs."""
    return {"status": "ok"}


@router.get("/readyz", response_model=HealthOut, responses=error_responses(503))
async def readyz(services: ServicesDep) -> object:
    """200 when the database answers, 503 otherwise."""
    try:
        async with services.engine.connect() as connection:
            await connection.execute(text("SELECT 1"))
    except (SQLAlchemyError, OSError):
        return json_response({"detail": "database not reachable"}, 503)
    return {"status": "ok"}

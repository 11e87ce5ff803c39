"""Pieces every resource's schema uses."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class RequestBody(BaseModel):
    """Base of request bodies: unknown fields are a 422, so a misspelt field never goes unseen."""

    model_config = ConfigDict(extra="forbid")


class ErrorOut(BaseModel):
    detail: str


class HealthOut(BaseModel):
    status: str


def error_responses(*codes: int) -> dict[int | str, dict[str, object]]:
    """OpenAPI entries for error answers, all of the `{"detail": "..."}` form."""
    descriptions = {
        401: "Not signed in, or the session has ended",
        403: "Missing or wrong CSRF token, or not allowed",
        404: "No such object for this user",
        409: "Conflict with the current state",
        413: "Request body too large",
        429: "Too many attempts; see Retry-After",
        502: "The model provider failed",
        503: "Not ready",
    }
    return {code: {"model": ErrorOut, "description": descriptions[code]} for code in codes}

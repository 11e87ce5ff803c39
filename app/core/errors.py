"""hearth's one error model: a `HearthError` says what went wrong in a sentence for a person, and
its class says which HTTP status that is. One handler (`install`) turns them into answers.

Services and domain code raise these and never build HTTP responses; routes don't catch them.
The body has the API's two shapes (docs/http-api.md, "Errors and conventions"):
`{"detail": "sentence"}`, and for 422 FastAPI's list form (`[{loc, msg, type}]`), whether
pydantic or hearth found the problem, so a client parses one shape per status and the OpenAPI
schema holds for both.

A database that refuses or drops the connection (down, restarting, out of connections) is
nobody's fault in the request: 503 with `Retry-After`, logged as a warning. Anything else that
escapes a route is hearth's own fault: the log keeps its text and traceback with the request id,
and the client is told only that id. Library, driver and database text never reaches a person.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, ClassVar

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from app.core.db.retry import database_unavailable
from app.core.http.request_id import current_request_id

log = logging.getLogger("hearth")


class HearthError(Exception):
    """A failure a person can act on, with the status it answers."""

    status: ClassVar[int] = 500

    def __init__(self, detail: str, *, headers: Mapping[str, str] | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        self.headers = dict(headers or {})

    def body(self) -> Any:
        return self.detail


class Unauthorized(HearthError):
    status = 401


class Forbidden(HearthError):
    status = 403


class NotFound(HearthError):
    status = 404


class Conflict(HearthError):
    status = 409


class TooLarge(HearthError):
    status = 413


class Invalid(HearthError):
    """A 422 naming the one field at fault, e.g. `Invalid(("body", "model"), "unknown model")`."""

    status = 422

    def __init__(self, location: tuple[str, ...], detail: str) -> None:
        super().__init__(detail)
        self.location = location

    def body(self) -> Any:
        return [{"loc": list(self.location), "msg": self.detail, "type": "value_error"}]


class TooManyRequests(HearthError):
    status = 429

    def __init__(self, detail: str, retry_after: int) -> None:
        super().__init__(detail, headers={"Retry-After": str(retry_after)})
        self.retry_after = retry_after


class Unavailable(HearthError):
    """hearth cannot do the work just now (its database does not answer): try again soon."""

    status = 503

    def __init__(self, detail: str, retry_after: int) -> None:
        super().__init__(detail, headers={"Retry-After": str(retry_after)})


DATABASE_UNAVAILABLE = "the database is not reachable just now; try again in a moment"
UNAVAILABLE_RETRY_SECONDS = 2


class UpstreamFailed(HearthError):
    """A model provider's request failed; the detail says how, in words for a person."""

    status = 502


def answer(error: HearthError) -> JSONResponse:
    return JSONResponse({"detail": error.body()}, status_code=error.status, headers=error.headers)


def install(app: FastAPI) -> None:
    """The one place errors become answers: `HearthError`s by their class, the rest as 500."""

    @app.exception_handler(HearthError)
    async def _hearth_error(request: Request, exc: HearthError) -> JSONResponse:
        return answer(exc)

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        request_id = current_request_id() or "-"
        if database_unavailable(exc):
            log.warning(
                "the database is unavailable on %s %s (request %s): %.200s",
                request.method,
                request.url.path,
                request_id,
                getattr(exc, "orig", None) or exc,
                extra={"request_id": request_id},
            )
            response = answer(Unavailable(DATABASE_UNAVAILABLE, UNAVAILABLE_RETRY_SECONDS))
            response.headers["X-Request-ID"] = request_id
            return response
        log.exception(
            "unhandled error on %s %s (request %s)",
            request.method,
            request.url.path,
            request_id,
            extra={"request_id": request_id},
        )
        return JSONResponse(
            {"detail": f"internal error (request {request_id})"},
            status_code=500,
            headers={"X-Request-ID": request_id},
        )

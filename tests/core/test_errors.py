"""The one error handler, over real HTTP: each `HearthError` answers its status with its
sentence (422 in FastAPI's list form, 429 with `Retry-After`), and anything else is a 500 that
carries the request id and none of the exception's text, which the log keeps."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import pytest
from fastapi import FastAPI

from app.core import errors
from app.core.http.request_id import RequestIdMiddleware
from tests.support import http_client, live_server

RAISED: dict[str, errors.HearthError] = {
    "unauthorized": errors.Unauthorized("not signed in"),
    "forbidden": errors.Forbidden("registration is closed"),
    "not-found": errors.NotFound("chat not found"),
    "conflict": errors.Conflict("a turn is already running in this chat"),
    "too-large": errors.TooLarge(
        "a file is over the upload limit", headers={"connection": "close"}
    ),
    "invalid": errors.Invalid(("body", "model"), "unknown model 'x'"),
    "too-many": errors.TooManyRequests("too many sign-ins; try again later", 42),
    "upstream": errors.UpstreamFailed("the summary request failed: overloaded"),
}


@pytest.fixture(scope="module")
async def base_url() -> AsyncIterator[str]:
    app = FastAPI()
    errors.install(app)
    app.add_middleware(RequestIdMiddleware)

    @app.get("/raise/{name}")
    async def _raise(name: str) -> None:
        raise RAISED[name]

    @app.get("/fault")
    async def _fault() -> None:
        raise RuntimeError("(psycopg.OperationalError) SELECT password_hash FROM users")

    async with live_server(app) as url:
        yield url


@pytest.mark.parametrize("name", sorted(RAISED))
async def test_each_error_answers_its_status_and_sentence(base_url: str, name: str) -> None:
    error = RAISED[name]
    async with http_client(base_url=base_url) as http:
        response = await http.get(f"/raise/{name}")
    assert response.status_code == error.status
    if isinstance(error, errors.Invalid):
        assert response.json() == {
            "detail": [
                {"loc": ["body", "model"], "msg": "unknown model 'x'", "type": "value_error"}
            ]
        }
    else:
        assert response.json() == {"detail": error.detail}
    for header, value in error.headers.items():
        assert response.headers[header] == value


async def test_statuses_follow_the_classes() -> None:
    statuses = {type(e).__name__: e.status for e in RAISED.values()}
    assert statuses == {
        "Unauthorized": 401,
        "Forbidden": 403,
        "NotFound": 404,
        "Conflict": 409,
        "TooLarge": 413,
        "Invalid": 422,
        "TooManyRequests": 429,
        "UpstreamFailed": 502,
    }
    assert RAISED["too-many"].headers == {"Retry-After": "42"}


async def test_a_fault_answers_500_with_the_request_id_only(
    base_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    async with http_client(base_url=base_url) as http:
        with caplog.at_level(logging.ERROR, logger="hearth"):
            response = await http.get("/fault", headers={"X-Request-ID": "req-500"})
    assert response.status_code == 500
    assert response.json() == {"detail": "internal error (request req-500)"}
    assert response.headers["x-request-id"] == "req-500"
    assert "psycopg" not in response.text and "password_hash" not in response.text
    logged = [r for r in caplog.records if r.exc_info]
    assert logged and "req-500" in logged[0].getMessage()
    assert "password_hash" in str(logged[0].exc_info[1])

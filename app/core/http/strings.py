"""JSON request bodies may carry only strings every backend can store: one check, at decoding.

JSON lets a string escape a lone UTF-16 surrogate (`"\\ud800"`) or NUL (`"\\u0000"`), and
Python's decoder takes both. Neither survives what comes after: a lone surrogate has no UTF-8
form, so hashing a password, writing a row or serialising the answer fails; PostgreSQL's text
cannot hold NUL at all. Each was a 500, and the connection was reset.

The check sits at JSON decoding rather than in each schema's string fields, so no field can
forget it, not even a free-form one: every string of every JSON body (values and keys, however
deeply nested) is checked before a route or pydantic sees it, and the first bad one is answered
422 in FastAPI's list form, located like pydantic's errors (`["body", "title"]`).
It runs as ASGI middleware on bodies that FastAPI would decode as JSON (a JSON content type,
or none), and costs a scan of the raw bytes: only a body that holds a `\\u` escape or is not
strict UTF-8 can decode to such a string, so only those are decoded here, with the decoder
FastAPI uses. A body that is not JSON at all is left for FastAPI to refuse in its own words.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.core.http.json import dumps

NUL = "\x00"


def _json_content(scope: Scope) -> bool:
    for name, value in scope["headers"]:
        if name == b"content-type":
            media: bytes = value.split(b";", 1)[0].strip().lower()
            return media == b"application/json" or media.endswith(b"+json")
    return True  # FastAPI decodes a body without a content type as JSON


def _string_problem(value: str) -> str | None:
    if value.isascii():
        return "strings may not contain NUL (\\u0000)" if NUL in value else None
    if NUL in value:
        return "strings may not contain NUL (\\u0000)"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return "strings must be valid Unicode: a lone surrogate (\\ud800-\\udfff) is not"
    return None


def find_bad_string(value: Any, path: tuple[Any, ...] = ()) -> tuple[list[Any], str] | None:
    """The location and problem of the first string that may not be stored, or None.

    Recursive like the decoder that built `value`, so as deep as it lets a body nest.
    """
    if isinstance(value, str):
        problem = _string_problem(value)
        return (list(path), problem) if problem else None
    if isinstance(value, dict):
        for key, child in value.items():
            problem = _string_problem(key)
            if problem:
                # The key itself cannot be echoed in the location: it is the problem.
                return [*path, "?"], problem + " (in a key)"
            found = find_bad_string(child, (*path, key))
            if found:
                return found
    elif isinstance(value, list):
        for index, child in enumerate(value):
            found = find_bad_string(child, (*path, index))
            if found:
                return found
    return None


def body_problem(body: bytes) -> dict[str, Any] | None:
    """The 422 item for a JSON body holding a string that may not be stored, or None."""
    if b"\\u" not in body:
        try:
            body.decode("utf-8")
        except UnicodeDecodeError:
            pass
        else:
            return None  # strict UTF-8 without escapes: no surrogate, and no NUL in a string
    try:
        decoded = json.loads(body)
    except ValueError:  # not JSON, or not text: FastAPI says so itself
        return None
    try:
        found = find_bad_string(decoded)
    except RecursionError:
        return {"loc": ["body"], "msg": "the body nests too deeply", "type": "value_error"}
    if found is None:
        return None
    location, problem = found
    return {"loc": ["body", *location], "msg": problem, "type": "value_error"}


class JsonStringsMiddleware:
    """Answers 422 to a JSON body with a lone surrogate or NUL in any string."""

    def __init__(self, app: ASGIApp, exempt: tuple[str, ...] = ()) -> None:
        self.app = app
        self.exempt = exempt

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] != "http"
            or scope["method"] in ("GET", "HEAD", "OPTIONS")
            or scope["path"] in self.exempt
            or not _json_content(scope)
        ):
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        messages: list[Message] = []
        while True:
            message = await receive()
            messages.append(message)
            if message["type"] != "http.request":
                break
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        problem = body_problem(b"".join(chunks))
        if problem is not None:
            await _refuse(send, problem)
            return

        async def replay() -> Message:
            if messages:
                return messages.pop(0)
            return await receive()

        await self.app(scope, replay, send)


async def _refuse(send: Send, problem: dict[str, Any]) -> None:
    body = dumps({"detail": [problem]})
    await send(
        {
            "type": "http.response.start",
            "status": 422,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})

"""A request id for every HTTP request: taken from `X-Request-ID` or made, echoed, logged.

An error a user sees never carries database, driver or library text; it carries this id
instead, and the log line with the full text carries it too (with the chat id), so an operator
finds one from the other. The id lives in a context variable: a turn started by a request runs
in a task created inside it and so keeps the request's id (`current_request_id`) for its whole
life. A pure ASGI middleware, so streamed responses pass through untouched.
"""

from __future__ import annotations

import re
import secrets
from contextvars import ContextVar

from starlette.types import ASGIApp, Message, Receive, Scope, Send

HEADER = "x-request-id"
_ACCEPTED = re.compile(r"[A-Za-z0-9._:-]{1,128}")
"""An id a client or proxy sends is kept when it is short and plain; anything else is replaced."""

_request_id: ContextVar[str | None] = ContextVar("hearth_request_id", default=None)


def current_request_id() -> str | None:
    return _request_id.get()


def new_request_id() -> str:
    return secrets.token_hex(8)


class RequestIdMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        given = next((v for k, v in scope["headers"] if k == HEADER.encode()), b"")
        text = given.decode("latin-1")
        request_id = text if _ACCEPTED.fullmatch(text) else new_request_id()
        # Each request runs in a task of its own, so the value never leaks into another request;
        # it is left set so that the last-resort error handler, outside this middleware, sees it.
        _request_id.set(request_id)

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [(k, v) for k, v in message.get("headers", []) if k != HEADER.encode()]
                headers.append((HEADER.encode(), request_id.encode()))
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_id)

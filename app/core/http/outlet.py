"""The server's own `send`, for the middle of a stream, which no middleware has anything to do with.

Every message a response sends passes through each ASGI layer between it and the server:
FastAPI's telemetry, Starlette's error handling (twice), the request id, the body ceiling, the
access log and metrics, CORS when configured, the tracing middleware when on. Each is an
`async def` that looks at the message's type and hands it on, and each acts on a response's start
(its status, its headers) or on its end (a span ended, a duration taken); none on a body chunk in
between. A turn's stream is hundreds of such chunks, so `EventStreamResponse` sends its start and
its end through every layer and the chunks between straight to the server, provided the start
the server got is the one it sent: no layer answered in its place (the body ceiling's 413, say)
or held it back. A layer that rewrote bodies would need every chunk; hearth has none, and any it
adds must leave `text/event-stream` alone, as Starlette's GZip middleware does.

`HearthApp` (the application class) keeps, for each HTTP request, the server's `send` and what
went out through it (`Outlet`); that one look at each message is all it adds to other responses.
What it saves is measured in `app.api.event_stream`.
"""

from __future__ import annotations

from typing import Final

from fastapi import FastAPI
from starlette.types import Message, Receive, Scope, Send

OUTLET: Final = "hearth.outlet"
"""Where a request's `Outlet` is kept in its scope."""


class Outlet:
    """The server's `send` for one request, and how far the response that went through it got."""

    __slots__ = ("complete", "send", "status")

    def __init__(self, send: Send) -> None:
        self.send = send
        self.status: int | None = None
        """The status the server was sent, once a response started."""
        self.complete = False

    async def observe(self, message: Message) -> None:
        """The `send` the middleware stack gets: the server's, noting what goes through it."""
        kind = message["type"]
        if kind == "http.response.start":
            self.status = message["status"]
        elif kind == "http.response.body" and not message.get("more_body", False):
            self.complete = True
        await self.send(message)


def direct_send(scope: Scope, status: int) -> Send | None:
    """The server's own `send`, for the body chunks of a response that started with `status`,
    if that start reached the server as it was sent and the response is not over; else None
    (the chunks go through the stack, as any response's do)."""
    outlet = scope.get(OUTLET)
    if isinstance(outlet, Outlet) and outlet.status == status and not outlet.complete:
        return outlet.send
    return None


class HearthApp(FastAPI):
    """FastAPI, keeping each HTTP request's `Outlet` in its scope, outside every middleware."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            outlet = Outlet(send)
            scope[OUTLET] = outlet
            send = outlet.observe
        await super().__call__(scope, receive, send)

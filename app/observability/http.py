"""Each HTTP request counted, timed and logged by route template, in a pure ASGI middleware.

Pure ASGI so a streamed answer passes through untouched and is timed to its last byte. The
metrics' label is the template the router matched (`/api/chats/{chat_id}`), read from the scope
the router filled in, so a chat id never becomes a label; a path no route matched is
`unmatched`. The access log line (logger `hearth.http`, INFO) says the method, the path without
its query (a query may hold a search for someone's email), the status and the time; it replaces
uvicorn's, which knows neither the request id nor the user.
"""

from __future__ import annotations

import logging
import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.observability.metrics import Reporter

METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})

access_log = logging.getLogger("hearth.http")


def route_template(scope: Scope) -> str:
    route = scope.get("route")
    path = getattr(route, "path", None)
    return path if isinstance(path, str) and path else "unmatched"


class ObservedRequests:
    def __init__(self, app: ASGIApp, metrics: Reporter) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500  # what the client gets when the app raises before answering

        async def send_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_status)
        finally:
            seconds = time.perf_counter() - started
            method = scope["method"] if scope["method"] in METHODS else "other"
            if self.metrics.enabled:
                self.metrics.http_request(method, route_template(scope), status, seconds)
            if access_log.isEnabledFor(logging.INFO):
                access_log.info(
                    "%s %s %d %.1f ms", method, scope.get("path", ""), status, seconds * 1000
                )

"""A ceiling on request bodies, enforced while they arrive.

JSON routes never need more than a few megabytes; without a ceiling one careless or hostile
client could make the server buffer gigabytes. `POST /api/uploads` has its own, larger limit
per file, which it enforces while it streams to disk, so that exact path is exempt here (and
only it: the other routes under `/api/uploads/` stay capped). A declared `Content-Length` over
the ceiling is refused before it reaches the app; a chunked body is counted as it streams.
Either way the rest of the body (up to `DRAIN_LIMIT`) is read and dropped before the 413 goes
out, so an ordinary HTTP client, which sends its whole body before reading, sees the answer
instead of a reset.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.core.http.json import dumps

DEFAULT_MAX_BODY = 4 * 1024 * 1024
DRAIN_LIMIT = 64 * 1024 * 1024


class BodyLimitMiddleware:
    def __init__(
        self, app: ASGIApp, max_body: int = DEFAULT_MAX_BODY, exempt: tuple[str, ...] = ()
    ) -> None:
        self.app = app
        self.max_body = max_body
        self.exempt = exempt

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in self.exempt:
            await self.app(scope, receive, send)
            return
        for name, value in scope["headers"]:
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    await _refuse(send, 400, "invalid Content-Length")
                    return
                if declared > self.max_body:
                    await _drain(receive, declared <= DRAIN_LIMIT)
                    await _refuse(send, 413, self._message())
                    return
        received = 0
        too_large = False

        async def counting_receive() -> Message:
            # Past the ceiling the app is told the body ended; whatever it answers to that
            # truncated body is replaced by the 413 below.
            nonlocal received, too_large
            if too_large:
                return {"type": "http.request", "body": b"", "more_body": False}
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_body:
                    too_large = True
                    if message.get("more_body", False):
                        await _drain(receive, True)
                    return {"type": "http.request", "body": b"", "more_body": False}
            return message

        async def guarded_send(message: Message) -> None:
            if not too_large:
                await send(message)
            elif message["type"] == "http.response.start":
                await _refuse(send, 413, self._message())

        await self.app(scope, counting_receive, guarded_send)

    def _message(self) -> str:
        return f"request body over {self.max_body} bytes"


async def _drain(receive: Receive, wanted: bool) -> None:
    """Read and drop what is left of the body, up to DRAIN_LIMIT bytes."""
    drained = 0
    while wanted and drained <= DRAIN_LIMIT:
        message = await receive()
        if message["type"] != "http.request":
            return
        drained += len(message.get("body", b""))
        if not message.get("more_body", False):
            return


async def _refuse(send: Send, status: int, detail: str) -> None:
    body = dumps({"detail": detail})
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})

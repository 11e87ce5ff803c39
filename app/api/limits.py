"""A ceiling on request bodies, enforced while they arrive.

JSON routes never need more than a few megabytes; without a ceiling one careless or hostile
client could make the server buffer gigabytes. Uploads have their own, larger limit and stream
to disk, so their path is exempt here. A declared `Content-Length` over the ceiling is refused
before reading; a chunked body is counted as it streams.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api.json import dumps

DEFAULT_MAX_BODY = 4 * 1024 * 1024


class BodyTooLarge(Exception):
    pass


class BodyLimitMiddleware:
    def __init__(
        self, app: ASGIApp, max_body: int = DEFAULT_MAX_BODY, exempt: tuple[str, ...] = ()
    ) -> None:
        self.app = app
        self.max_body = max_body
        self.exempt = exempt

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"].startswith(self.exempt):
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
                    await _refuse(send, 413, self._message())
                    return
        received = 0
        started = False

        async def counting_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_body:
                    raise BodyTooLarge
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, counting_receive, tracking_send)
        except BodyTooLarge:
            if not started:
                await _refuse(send, 413, self._message())

    def _message(self) -> str:
        return f"request body over {self.max_body} bytes"


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
